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
 *   KILN_ERR_OVERFLOW    a shape whose byte size exceeds 2^48 (kiln's largest tensor)
 *   KILN_ERR_NOMEM
 * Decisions numpy leaves open: bytes after the data are an error (numpy ignores them; kiln
 * treats them as a sign the header's shape is wrong); bool elements other than 0 and 1 are
 * read as 1 (numpy's truthiness); '<b1' is accepted as a spelling of '|b1'.  Hosts are
 * little-endian (checked at compile time), so elements are copied as they are.
 *
 * The interface is in kiln.h's terms, for `kiln run`; npy.c itself reports through kiln's
 * error state and allocates through lib/ir (so check_npy's fail-the-Nth-allocation loop
 * reaches it).
 */
#ifndef KILN_NPY_H
#define KILN_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln.h"

/* An array's element type and C-order shape. */
typedef struct npy_type {
    kiln_dtype dtype;
    struct {
        int rank;
        int64_t dims[KILN_MAX_RANK];
    } shape;
} npy_type;

/* Elements and bytes of an array of type t (a checked type: npy_read_* give only those);
 * equal types. */
size_t npy_type_count(const npy_type *t);
size_t npy_type_bytes(const npy_type *t);
bool npy_type_equal(const npy_type *a, const npy_type *b);

typedef struct npy_array {
    npy_type type; /* dtype and shape from the header */
    size_t count; /* elements */
    size_t bytes; /* count * dtype size */
    void *data;   /* `bytes` bytes (never NULL after a successful read); owned */
} npy_array;

/* Read a whole .npy file.  On success *out owns its data (release with npy_array_free);
 * on failure *out is zeroed.  `path` names the file in messages. */
kiln_status npy_read_file(const char *path, npy_array *out);

/* Parse a .npy image held in memory (the data is copied).  `name` names it in messages. */
kiln_status npy_read_mem(const void *buf, size_t len, const char *name, npy_array *out);

/* Write `data` (npy_type_bytes(type) bytes, row-major) as a version 1.0 .npy file laid out
 * byte for byte as numpy's np.save writes it.  A partial file is removed on failure. */
kiln_status npy_write_file(const char *path, const npy_type *type, const void *data);

/* The same into an open stream; `name` names it in messages. */
kiln_status npy_write_stream(FILE *f, const char *name, const npy_type *type, const void *data);

/* The version 1.0 header (magic, length, dict, padding) for `type` into buf; returns its
 * length, a multiple of 64.  buf needs NPY_HEADER_MAX bytes. */
#define NPY_HEADER_MAX 512
size_t npy_header(const npy_type *type, char *buf);

/* Free the data and zero *a.  NULL and zeroed arrays are fine. */
void npy_array_free(npy_array *a);

#endif
