/* fuzz_npy.c — libFuzzer target: arbitrary bytes through the .npy reader of the kiln
 * command (tools/kiln/npy.c), and every image it accepts through the writer and back
 * (docs/fuzzing.md).
 *
 * Findings: a crash, a sanitizer report, or a broken promise of npy.h: an error without a
 * message or with a code the header does not list; an accepted array whose count or byte
 * size disagree with its type; an accepted array that np.save's layout (npy_write_stream)
 * does not read back to the same type and bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "npy.h"

static void
fail(const char *what)
{
    fprintf(stderr, "fuzz_npy: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    npy_array a;
    kiln_status st = npy_read_mem(data, size, "fuzz.npy", &a);
    if (st) {
        if (!kiln_errmsg()[0] || strncmp(kiln_errmsg(), "fuzz.npy: ", 10) != 0)
            fail("an error without a \"<file>: \" message");
        switch (st) {
        case KILN_ERR_FORMAT: case KILN_ERR_DTYPE: case KILN_ERR_UNSUPPORTED:
        case KILN_ERR_SHAPE: case KILN_ERR_OVERFLOW: case KILN_ERR_NOMEM:
            return 0;
        default:
            fail(kiln_errmsg());
        }
    }
    if (a.count != npy_type_count(&a.type) ||
        a.bytes != a.count * kiln_dtype_size(a.type.dtype) || !a.data)
        fail("an accepted array whose count or size disagree with its type");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        fail("open_memstream");
    if (npy_write_stream(f, "roundtrip.npy", &a.type, a.data) != KILN_OK)
        fail(kiln_errmsg());
    fclose(f);
    npy_array b;
    if (npy_read_mem(buf, len, "roundtrip.npy", &b) != KILN_OK)
        fail(kiln_errmsg());
    if (!npy_type_equal(&a.type, &b.type) || a.bytes != b.bytes ||
        memcmp(a.data, b.data, a.bytes) != 0)
        fail("the written image does not read back to the same array");
    npy_array_free(&a);
    npy_array_free(&b);
    free(buf);
    return 0;
}
