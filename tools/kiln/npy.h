/* npy.h — NumPy .npy files for the kiln command: format versions 1.0, 2.0 and 3.0,
 * little-endian, C order, the five kiln dtypes ('<f4' '<f8' '<i4' '<i8' '|b1').
 *
 * Every error sets the thread's kiln error with a message "<file>: <problem>: <detail>":
 *   KILN_ERR_IO          the file cannot be opened, read or written
 *   KILN_ERR_FORMAT      not a .npy file: bad magic, unknown version, malformed header dict,
 *                        truncated header or data, bytes after the data
 *   KILN_ERR_DTYPE       a valid .npy dtype kiln has no equivalent for (big-endian, object,
 *                        structured, '<f2', ...)
 *   KILN_ERR_UNSUPPORTED fortran_order: True
 *   KILN_ERR_SHAPE       rank above 8, a negative dimension
 *   KILN_ERR_OVERFLOW    a shape whose byte size exceeds 2^48 (ir_shape_check)
 *   KILN_ERR_NOMEM
 * Decisions numpy leaves open: bytes after the data are an error (numpy ignores them; kiln
 * treats them as a sign the header's shape is wrong); bool elements other than 0 and 1 are
 * read as 1 (numpy's truthiness); '<b1' is accepted as a spelling of '|b1'.  Hosts are
 * little-endian (checked at compile time), so elements are copied as they are.
 */
#ifndef KILN_NPY_H
#define KILN_NPY_H

#include <stddef.h>
#include <stdio.h>

#include "ir.h"

typedef struct npy_array {
    ir_type type; /* dtype and shape from the header */
    size_t count; /* elements */
    size_t bytes; /* count * dtype size */
    void *data;   /* `bytes` bytes (never NULL after a successful read); owned */
} npy_array;

/* Read a whole .npy file.  On success *out owns its data (release with npy_array_free);
 * on failure *out is zeroed.  `path` names the file in messages. */
kiln_status npy_read_file(const char *path, npy_array *out);

/* Parse a .npy image held in memory (the data is copied).  `name` names it in messages. */
kiln_status npy_read_mem(const void *buf, size_t len, const char *name, npy_array *out);

/* Write `data` (ir_type_bytes(type) bytes, row-major) as a version 1.0 .npy file laid out
 * byte for byte as numpy's np.save writes it.  A partial file is removed on failure. */
kiln_status npy_write_file(const char *path, const ir_type *type, const void *data);

/* The same into an open stream; `name` names it in messages. */
kiln_status npy_write_stream(FILE *f, const char *name, const ir_type *type, const void *data);

/* The version 1.0 header (magic, length, dict, padding) for `type` into buf; returns its
 * length, a multiple of 64.  buf needs NPY_HEADER_MAX bytes. */
#define NPY_HEADER_MAX 512
size_t npy_header(const ir_type *type, char *buf);

/* Free the data and zero *a.  NULL and zeroed arrays are fine. */
void npy_array_free(npy_array *a);

#endif
