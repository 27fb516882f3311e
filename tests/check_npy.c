/* check_npy.c — the kiln command's .npy reader and writer (tools/kiln/npy.c).
 *
 * Oracles: the .npy format specification (numpy/lib/format.py, NEP 1) written out by hand
 * as byte strings below, and — when /usr/bin/python3 has numpy — numpy itself: files numpy
 * writes are read and checked element by element, and files kiln writes are loaded by
 * numpy and compared byte for byte with what np.save writes for the same array. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir.h"
#include "npy.h"
#include "support.h"

static char tmpdir[64];

static void
make_tmpdir(void)
{
    strcpy(tmpdir, "/tmp/kiln-npy-XXXXXX");
    ck_assert_msg(mkdtemp(tmpdir) != NULL, "mkdtemp: %s", strerror(errno));
}

static void
remove_tmpdir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static char *
tmppath(char *buf, size_t n, const char *file)
{
    snprintf(buf, n, "%s/%s", tmpdir, file);
    return buf;
}

static npy_type
mktype(kiln_dtype t, int rank, const int64_t *dims)
{
    npy_type ty = {.dtype = t, .shape = {.rank = rank}};
    for (int i = 0; i < rank; i++)
        ty.shape.dims[i] = dims[i];
    return ty;
}

/* The value both kiln and the numpy script put at flat index i (exact in every dtype). */
static double
pattern(kiln_dtype t, size_t i)
{
    double v = (double)((i * 7) % 11) - 5;
    if (ir_dtype_is_float(t))
        return v * 0.25;
    if (t == KILN_DTYPE_BOOL)
        return i % 3 == 0;
    return v;
}

static void
fill_pattern(kiln_dtype t, void *data, size_t count)
{
    for (size_t i = 0; i < count; i++)
        ir_store_f64(t, data, i, pattern(t, i));
}

/* ---- byte-exact headers, from the format specification ------------------------------ */

/* "\x93NUMPY" 1 0, u16 length, the dict, spaces, '\n': 128 bytes in all for these dicts
 * (numpy also leaves 21 - len(str(shape[0])) spare spaces after the dict, then pads). */
static size_t
spec_header(char *buf, const char *dict)
{
    size_t n = strlen(dict);
    memcpy(buf, "\x93NUMPY\x01\x00\x76\x00", 10); /* 0x76 = 118 = 128 - 10 */
    memcpy(buf + 10, dict, n);
    memset(buf + 10 + n, ' ', 127 - 10 - n);
    buf[127] = '\n';
    return 128;
}

START_TEST(test_header_bytes)
{
    static const struct {
        kiln_dtype t;
        int rank;
        int64_t dims[3];
        const char *dict;
    } cases[] = {
        {KILN_DTYPE_F32, 1, {3}, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"},
        {KILN_DTYPE_BOOL, 0, {0}, "{'descr': '|b1', 'fortran_order': False, 'shape': (), }"},
        {KILN_DTYPE_I64, 2, {2, 3}, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }"},
        {KILN_DTYPE_F64, 1, {0}, "{'descr': '<f8', 'fortran_order': False, 'shape': (0,), }"},
        {KILN_DTYPE_I32,
         3,
         {3, 0, 2},
         "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 0, 2), }"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char want[128], got[NPY_HEADER_MAX];
        spec_header(want, cases[c].dict);
        npy_type t = mktype(cases[c].t, cases[c].rank, cases[c].dims);
        size_t n = npy_header(&t, got);
        ck_assert_msg(n == 128, "case %zu: header is %zu bytes", c, n);
        ck_assert_msg(memcmp(want, got, 128) == 0, "case %zu: got %.128s", c, got);
    }
    /* The spare spaces count, to the byte: this dict is 98 bytes; 10 + 98 + 1 + 19 spaces
     * would just fit in 128, but numpy leaves 21 - 1 spare spaces (first dim: 1 digit), so
     * the header takes 192 bytes (length field 182). */
    {
        const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': "
                           "(0, 10000000000, 10000000000, 10000000000, 7), }";
        ck_assert_uint_eq(strlen(dict), 98);
        int64_t d5[5] = {0, 10000000000, 10000000000, 10000000000, 7};
        npy_type t = mktype(KILN_DTYPE_F32, 5, d5);
        char want[192], got[NPY_HEADER_MAX];
        memcpy(want, "\x93NUMPY\x01\x00\xb6\x00", 10);
        memcpy(want + 10, dict, 98);
        memset(want + 108, ' ', 83);
        want[191] = '\n';
        ck_assert_uint_eq(npy_header(&t, got), 192);
        ck_assert_msg(memcmp(want, got, 192) == 0, "got %.192s", got);
    }
    /* A long shape takes the header past 128 bytes: still a multiple of 64, '\n' last. */
    int64_t dims[8] = {1000000000000, 2, 3, 4, 5, 6, 7, 8};
    npy_type t = mktype(KILN_DTYPE_F32, 8, dims);
    char got[NPY_HEADER_MAX];
    size_t n = npy_header(&t, got);
    ck_assert_uint_eq(n % 64, 0);
    ck_assert_int_eq(got[n - 1], '\n');
    ck_assert_uint_eq((unsigned char)got[8] | (unsigned char)got[9] << 8, n - 10);
}
END_TEST

/* ---- round trips --------------------------------------------------------------------- */

static const struct {
    int rank;
    int64_t dims[3];
} shapes[] = {
    {0, {0}}, {1, {0}}, {1, {5}}, {2, {2, 3}}, {2, {0, 4}}, {3, {3, 0, 2}}, {3, {2, 3, 4}},
};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])

START_TEST(test_round_trip)
{
    make_tmpdir();
    for (int t = 0; t < KILN_DTYPE_COUNT; t++) {
        for (int s = 0; s < NSHAPES; s++) {
            npy_type ty = mktype((kiln_dtype)t, shapes[s].rank, shapes[s].dims);
            size_t count = npy_type_count(&ty), bytes = npy_type_bytes(&ty);
            unsigned char *data = malloc(bytes + 1);
            fill_pattern(ty.dtype, data, count);
            if (t == KILN_DTYPE_F32 && count >= 5) {
                /* Bits survive as they are: -0.0, a NaN payload, a subnormal. */
                uint32_t special[3] = {0x80000000u, 0x7fc01234u, 0x00000001u};
                memcpy(data + 4, special, sizeof special);
            }
            char path[128], name[32];
            snprintf(name, sizeof name, "rt_%d_%d.npy", t, s);
            tmppath(path, sizeof path, name);
            kiln_status st = npy_write_file(path, &ty, data);
            ck_assert_msg(st == KILN_OK, "write %s: %s", path, kiln_errmsg());
            npy_array a;
            st = npy_read_file(path, &a);
            ck_assert_msg(st == KILN_OK, "read %s: %s", path, kiln_errmsg());
            ck_assert_msg(npy_type_equal(&a.type, &ty), "%s: type changed", path);
            ck_assert_uint_eq(a.count, count);
            ck_assert_uint_eq(a.bytes, bytes);
            ck_assert_ptr_nonnull(a.data);
            ck_assert_msg(memcmp(a.data, data, bytes) == 0, "%s: data changed", path);
            /* The file is exactly header + data. */
            struct stat sb;
            ck_assert_int_eq(stat(path, &sb), 0);
            char hdr[NPY_HEADER_MAX];
            ck_assert_uint_eq((size_t)sb.st_size, npy_header(&ty, hdr) + bytes);
            npy_array_free(&a);
            ck_assert_ptr_null(a.data);
            free(data);
        }
    }
    remove_tmpdir();
}
END_TEST

/* ---- hand-built images: what numpy (and older numpys) may write ------------------------ */

/* An image: magic, version major.0, header length (u16 or u32), header text as given (no
 * padding added), then `data` bytes of the pattern. */
static unsigned char *
image(int major, const char *header, size_t data, size_t *len)
{
    size_t hn = strlen(header), lb = major == 1 ? 2 : 4;
    *len = 8 + lb + hn + data;
    unsigned char *b = calloc(1, *len + 1);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    for (size_t i = 0; i < lb; i++)
        b[8 + i] = (unsigned char)(hn >> (8 * i));
    memcpy(b + 8 + lb, header, hn);
    for (size_t i = 0; i < data; i++)
        b[8 + lb + hn + i] = (unsigned char)(i * 37 + 1);
    return b;
}

START_TEST(test_header_variants)
{
    static const struct {
        int major;
        const char *header;
        kiln_dtype t;
        int rank;
        int64_t dims[3];
    } cases[] = {
        {1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }       \n",
         KILN_DTYPE_F32,
         1,
         {3}},
        {2,
         "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }\n",
         KILN_DTYPE_F64,
         2,
         {2, 2}},
        {3, "{'descr': '<i4', 'fortran_order': False, 'shape': (), }\n", KILN_DTYPE_I32, 0, {0}},
        /* keys in any order, double quotes, no trailing comma, odd whitespace */
        {1,
         "{ \"shape\" :(4 ,1,) ,'fortran_order':False,\t'descr':'<i8'}",
         KILN_DTYPE_I64,
         2,
         {4, 1}},
        /* Python 2 era long dims, 16-byte aligned header of numpy < 1.14 */
        {1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), } \n",
         KILN_DTYPE_F32,
         2,
         {2, 3}},
        {1, "{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }\n", KILN_DTYPE_BOOL, 1, {5}},
        {1, "{'descr': '<b1', 'fortran_order': False, 'shape': (5,), }\n", KILN_DTYPE_BOOL, 1, {5}},
        {1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (7, 0), }\n",
         KILN_DTYPE_F32,
         2,
         {7, 0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        npy_type want = mktype(cases[c].t, cases[c].rank, cases[c].dims);
        size_t bytes = npy_type_bytes(&want), len;
        unsigned char *img = image(cases[c].major, cases[c].header, bytes, &len);
        npy_array a;
        kiln_status st = npy_read_mem(img, len, "variant.npy", &a);
        ck_assert_msg(st == KILN_OK, "case %zu: %s", c, kiln_errmsg());
        ck_assert_msg(npy_type_equal(&a.type, &want), "case %zu: wrong type", c);
        const unsigned char *src = img + len - bytes;
        for (size_t i = 0; i < bytes; i++) {
            /* Bool bytes are normalised to 0/1 (numpy's truthiness); others are copied. */
            unsigned char e = cases[c].t == KILN_DTYPE_BOOL ? src[i] != 0 : src[i];
            ck_assert_msg(((unsigned char *)a.data)[i] == e, "case %zu: byte %zu", c, i);
        }
        npy_array_free(&a);
        free(img);
    }
}
END_TEST

START_TEST(test_bool_normalised)
{
    size_t len;
    unsigned char *img =
        image(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }\n", 4, &len);
    memcpy(img + len - 4, "\x00\x02\xff\x01", 4);
    npy_array a;
    ck_assert_int_eq(npy_read_mem(img, len, "b.npy", &a), KILN_OK);
    ck_assert_mem_eq(a.data, "\x00\x01\x01\x01", 4);
    npy_array_free(&a);
    free(img);
}
END_TEST

/* ---- malformed files ----------------------------------------------------------------- */

#define DICT(descr, order, shape)                                                                  \
    "{'descr': " descr ", 'fortran_order': " order ", 'shape': " shape ", }\n"

START_TEST(test_malformed)
{
    static const struct {
        int major;
        const char *header;
        size_t data;
        kiln_status code;
        const char *needle;
    } cases[] = {
        {1, "[1, 2]\n", 0, KILN_ERR_FORMAT, "bad header: expected '{'"},
        {1, "{'descr': '<f4', 'fortran_order': False}\n", 0, KILN_ERR_FORMAT,
         "missing key 'shape'"},
        {1, "{'descr': '<f4', 'shape': (1,)}\n", 4, KILN_ERR_FORMAT, "missing key 'fortran_order'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'foo': 1}\n", 4,
         KILN_ERR_FORMAT, "unknown key 'foo'"},
        {1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}\n", 4,
         KILN_ERR_FORMAT, "duplicate key 'descr'"},
        {1, "{'descr' '<f4'}\n", 0, KILN_ERR_FORMAT, "expected ':' after a key"},
        {1, "{descr: '<f4'}\n", 0, KILN_ERR_FORMAT, "expected a quoted string"},
        {1, "{'descr': '<f4\n", 0, KILN_ERR_FORMAT, "unsupported character in a string"},
        {1, "{'descr': '<f4", 0, KILN_ERR_FORMAT, "unterminated string"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,) 'x'}\n", 4, KILN_ERR_FORMAT,
         "expected ',' or '}'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }  x\n", 4, KILN_ERR_FORMAT,
         "unexpected text after the dict"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), ", 4, KILN_ERR_FORMAT,
         "at the end of the header"},
        {1, DICT("'<f4'", "0", "(1,)"), 4, KILN_ERR_FORMAT, "expected True or False"},
        {1, DICT("'<f4'", "Truex", "(1,)"), 4, KILN_ERR_FORMAT, "expected True or False"},
        {1, DICT("'<f4'", "True", "(2, 2)"), 16, KILN_ERR_UNSUPPORTED, "fortran_order is True"},
        {1, DICT("'>f4'", "False", "(1,)"), 4, KILN_ERR_DTYPE, "'>f4': big-endian"},
        {1, DICT("'>i8'", "False", "(1,)"), 8, KILN_ERR_DTYPE, "'>i8': big-endian"},
        {1, DICT("'|O'", "False", "(1,)"), 8, KILN_ERR_DTYPE, "'|O': object arrays"},
        {1, DICT("'<f2'", "False", "(1,)"), 2, KILN_ERR_DTYPE, "unsupported dtype: '<f2'"},
        {1, DICT("'<u4'", "False", "(1,)"), 4, KILN_ERR_DTYPE, "unsupported dtype: '<u4'"},
        {1, DICT("'|u1'", "False", "(1,)"), 1, KILN_ERR_DTYPE, "unsupported dtype: '|u1'"},
        {1, DICT("'=f4'", "False", "(1,)"), 4, KILN_ERR_DTYPE, "unsupported dtype: '=f4'"},
        {1, DICT("[('a', '<f4')]", "False", "(1,)"), 4, KILN_ERR_DTYPE, "structured"},
        {1, DICT("'<f4'", "False", "(3)"), 12, KILN_ERR_FORMAT, "(N) is not a tuple"},
        {1, DICT("'<f4'", "False", "3"), 12, KILN_ERR_FORMAT, "shape: expected a tuple"},
        {1, DICT("'<f4'", "False", "(3 4)"), 48, KILN_ERR_FORMAT, "expected ',' or ')'"},
        {1, DICT("'<f4'", "False", "('a',)"), 4, KILN_ERR_FORMAT, "expected an integer"},
        {1, DICT("'<f4'", "False", "(,)"), 0, KILN_ERR_FORMAT, "expected an integer"},
        {1, DICT("'<f4'", "False", "(-1,)"), 0, KILN_ERR_SHAPE, "negative dimension"},
        {1, DICT("'<f4'", "False", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), 4, KILN_ERR_SHAPE,
         "rank above 8"},
        {1, DICT("'<f4'", "False", "(1099511627776, 1099511627776)"), 0, KILN_ERR_OVERFLOW,
         "tensor too large"},
        {1, DICT("'<f8'", "False", "(35184372088833,)"), 0, KILN_ERR_OVERFLOW, "tensor too large"},
        {1, DICT("'<f4'", "False", "(99999999999999999999,)"), 0, KILN_ERR_OVERFLOW,
         "exceeds 2^63"},
        {1, DICT("'<f4'", "False", "(3,)"), 8, KILN_ERR_FORMAT,
         "truncated data: expected 12 bytes, got 8"},
        {1, DICT("'<f4'", "False", "(3,)"), 16, KILN_ERR_FORMAT,
         "trailing data: 4 bytes after the 12 bytes"},
        {1, DICT("'<f4'", "False", "()"), 0, KILN_ERR_FORMAT, "truncated data"},
        {3, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'd\xc3\xa9': 1}\n", 4,
         KILN_ERR_FORMAT, "unsupported character in a string"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t len;
        unsigned char *img = image(cases[c].major, cases[c].header, cases[c].data, &len);
        npy_array a;
        memset(&a, 0x5a, sizeof a);
        kiln_clear_error();
        kiln_status st = npy_read_mem(img, len, "bad.npy", &a);
        ck_assert_msg(st == cases[c].code, "case %zu (%s): got %s: %s", c, cases[c].header,
                      kiln_status_str(st), kiln_errmsg());
        ts_assert_error(cases[c].code, cases[c].needle);
        ck_assert_msg(strncmp(kiln_errmsg(), "bad.npy: ", 9) == 0, "case %zu: %s", c,
                      kiln_errmsg());
        ck_assert_ptr_null(a.data);
        free(img);
    }
}
END_TEST

START_TEST(test_malformed_preamble)
{
    size_t len;
    const char *hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
    unsigned char *good = image(1, hdr, 8, &len);
    size_t data_at = 10 + strlen(hdr);
    npy_array a;
    /* Every proper prefix of a good file is truncated somewhere: always an error. */
    for (size_t n = 0; n < len; n++) {
        kiln_status st = npy_read_mem(good, n, "cut.npy", &a);
        ck_assert_msg(st == KILN_ERR_FORMAT, "prefix %zu: %s", n, kiln_errmsg());
        const char *want = n < 6         ? "bad magic"
                           : n < data_at ? "truncated header"
                                         : "truncated data";
        ts_assert_error(KILN_ERR_FORMAT, want);
    }
    ck_assert_int_eq(npy_read_mem(good, len, "cut.npy", &a), KILN_OK);
    npy_array_free(&a);

    unsigned char bad[sizeof "\x93NUMPY\x01\x00"];
    memcpy(bad, good, 8);
    bad[5] = 'X';
    ck_assert_int_eq(npy_read_mem(bad, 8, "m.npy", &a), KILN_ERR_FORMAT);
    ts_assert_error(KILN_ERR_FORMAT, "m.npy: not a .npy file: bad magic");
    static const unsigned char versions[][2] = {{4, 0}, {0, 0}, {1, 1}, {2, 5}};
    for (size_t v = 0; v < 4; v++) {
        memcpy(bad, good, 8);
        bad[6] = versions[v][0];
        bad[7] = versions[v][1];
        char want[64];
        snprintf(want, sizeof want, "unsupported .npy version: %u.%u", versions[v][0],
                 versions[v][1]);
        ck_assert_int_eq(npy_read_mem(bad, 8, "v.npy", &a), KILN_ERR_FORMAT);
        ts_assert_error(KILN_ERR_FORMAT, want);
    }
    /* A header length past the end of the file, and a NUL inside the header. */
    unsigned char *img = image(2, "{'descr': '<f4'}", 0, &len);
    img[11] = 0x80;
    ck_assert_int_eq(npy_read_mem(img, len, "h.npy", &a), KILN_ERR_FORMAT);
    ts_assert_error(KILN_ERR_FORMAT, "truncated header: header length 2147483664");
    free(img);
    img = image(1, "{'descr': '<f4'}", 0, &len);
    img[12] = '\0';
    ck_assert_int_eq(npy_read_mem(img, len, "h.npy", &a), KILN_ERR_FORMAT);
    ts_assert_error(KILN_ERR_FORMAT, "NUL byte");
    free(img);
    free(good);
}
END_TEST

START_TEST(test_file_errors)
{
    make_tmpdir();
    char path[128];
    npy_array a;
    ck_assert_int_eq(npy_read_file(tmppath(path, sizeof path, "absent.npy"), &a), KILN_ERR_IO);
    ts_assert_error(KILN_ERR_IO, "absent.npy: cannot open: No such file");
    ck_assert_int_eq(npy_read_file(tmpdir, &a), KILN_ERR_IO);
    ts_assert_error(KILN_ERR_IO, "read failed");
    int64_t dims[1] = {2};
    npy_type t = mktype(KILN_DTYPE_F32, 1, dims);
    float v[2] = {1, 2};
    ck_assert_int_eq(npy_write_file(tmppath(path, sizeof path, "no/such/dir.npy"), &t, v),
                     KILN_ERR_IO);
    ts_assert_error(KILN_ERR_IO, "dir.npy: cannot create");
    /* An empty file is not a .npy file. */
    FILE *f = fopen(tmppath(path, sizeof path, "empty.npy"), "wb");
    fclose(f);
    ck_assert_int_eq(npy_read_file(path, &a), KILN_ERR_FORMAT);
    ts_assert_error(KILN_ERR_FORMAT, "empty.npy: not a .npy file");
    /* Writing a type kiln would refuse to read is refused too. */
    int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    t = mktype(KILN_DTYPE_F32, 2, huge);
    ck_assert_int_eq(npy_write_file(tmppath(path, sizeof path, "huge.npy"), &t, v),
                     KILN_ERR_OVERFLOW);
    ck_assert_int_eq(access(path, F_OK), -1);
    remove_tmpdir();
}
END_TEST

/* Fail each allocation in turn: an error, never a leak or a crash, until the read passes. */
START_TEST(test_oom)
{
    make_tmpdir();
    char path[128];
    int64_t dims[2] = {30, 70};
    npy_type t = mktype(KILN_DTYPE_F64, 2, dims);
    double *data = malloc(npy_type_bytes(&t));
    fill_pattern(t.dtype, data, 2100);
    ck_assert_int_eq(npy_write_file(tmppath(path, sizeof path, "oom.npy"), &t, data), KILN_OK);
    for (int which = 0; which < 2; which++) {
        bool passed = false;
        for (long n = 0; n < 100 && !passed; n++) {
            npy_array a;
            ir_test_fail_alloc_after(n);
            kiln_status st;
            if (which == 0) {
                st = npy_read_file(path, &a);
            } else {
                static const unsigned char small[] =
                    "\x93NUMPY\x01\x00\x3a\x00{'descr': '<i4', 'fortran_order': False, "
                    "'shape': (1,), }\n\x07\x00\x00\x00";
                st = npy_read_mem(small, sizeof small - 1, "small.npy", &a);
            }
            ir_test_fail_alloc_after(-1);
            if (st == KILN_OK) {
                passed = true;
                ck_assert_int_eq(memcmp(a.data, which ? (const void *)"\x07\0\0\0" : data,
                                        which ? 4 : npy_type_bytes(&t)),
                                 0);
                npy_array_free(&a);
            } else {
                ts_assert_error(KILN_ERR_NOMEM, "out of memory");
                ck_assert_ptr_null(a.data);
            }
        }
        ck_assert_msg(passed, "read %d never succeeded", which);
    }
    free(data);
    remove_tmpdir();
}
END_TEST

/* ---- numpy as the oracle ------------------------------------------------------------- */

static const char *
numpy_python(void)
{
    static const char *const candidates[] = {"/usr/bin/python3", "python3"};
    for (size_t i = 0; i < 2; i++) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "%s -c 'import numpy' >/dev/null 2>&1", candidates[i]);
        if (system(cmd) == 0)
            return candidates[i];
    }
    return NULL;
}

/* numpy writes one file per (dtype, shape, version) with the pattern; kiln writes the same
 * arrays; numpy checks kiln's files (values, and bytes against np.save) and kiln checks
 * numpy's (values). */
static const char numpy_script[] =
    "import io, os, sys\n"
    "import numpy as np\n"
    "d = sys.argv[1]\n"
    "mode = sys.argv[2]\n"
    "dtypes = ['<f4', '<f8', '<i4', '<i8', '|b1']\n"
    "shapes = [(), (0,), (5,), (2, 3), (0, 4), (3, 0, 2), (2, 3, 4)]\n"
    "def pattern(dt, shape):\n"
    "    n = int(np.prod(shape))\n"
    "    i = np.arange(n)\n"
    "    v = ((i * 7) % 11 - 5).astype(np.float64)\n"
    "    if dt[1] == 'f': v = v * 0.25\n"
    "    if dt[1] == 'b': v = (i % 3 == 0)\n"
    "    return v.astype(dt).reshape(shape)\n"
    "bad = 0\n"
    "for t, dt in enumerate(dtypes):\n"
    "    for s, shape in enumerate(shapes):\n"
    "        a = pattern(dt, shape)\n"
    "        if mode == 'write':\n"
    "            for v in (1, 2, 3):\n"
    "                with open(os.path.join(d, 'np_%d_%d_v%d.npy' % (t, s, v)), 'wb') as f:\n"
    "                    np.lib.format.write_array(f, a, version=(v, 0))\n"
    "        else:\n"
    "            p = os.path.join(d, 'kiln_%d_%d.npy' % (t, s))\n"
    "            b = np.load(p)\n"
    "            if b.dtype != a.dtype or b.shape != a.shape or not np.array_equal(a, b):\n"
    "                print('numpy reads different values from', p); bad += 1\n"
    "            ref = io.BytesIO(); np.save(ref, a)\n"
    "            if open(p, 'rb').read() != ref.getvalue():\n"
    "                print('bytes differ from np.save:', p); bad += 1\n"
    "sys.exit(1 if bad else 0)\n";

static int
run_script(const char *python, const char *mode)
{
    char script[128], cmd[512];
    tmppath(script, sizeof script, "oracle.py");
    FILE *f = fopen(script, "w");
    ck_assert_ptr_nonnull(f);
    fputs(numpy_script, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s '%s' '%s' %s", python, script, tmpdir, mode);
    return system(cmd);
}

START_TEST(test_numpy_oracle)
{
    const char *python = numpy_python();
    if (!python) {
        printf("check_npy: numpy not found (apt-get install python3-numpy): oracle skipped\n");
        return;
    }
    make_tmpdir();
    ck_assert_msg(run_script(python, "write") == 0, "numpy could not write the fixtures");
    for (int t = 0; t < KILN_DTYPE_COUNT; t++) {
        for (int s = 0; s < NSHAPES; s++) {
            npy_type ty = mktype((kiln_dtype)t, shapes[s].rank, shapes[s].dims);
            size_t count = npy_type_count(&ty);
            for (int v = 1; v <= 3; v++) {
                char path[128], name[64];
                snprintf(name, sizeof name, "np_%d_%d_v%d.npy", t, s, v);
                npy_array a;
                kiln_status st = npy_read_file(tmppath(path, sizeof path, name), &a);
                ck_assert_msg(st == KILN_OK, "%s: %s", name, kiln_errmsg());
                ck_assert_msg(npy_type_equal(&a.type, &ty), "%s: wrong type", name);
                for (size_t i = 0; i < count; i++) {
                    double got = ir_load_f64(ty.dtype, a.data, i);
                    ck_assert_msg(got == pattern(ty.dtype, i), "%s[%zu] = %g, want %g", name, i,
                                  got, pattern(ty.dtype, i));
                }
                npy_array_free(&a);
            }
            void *data = malloc(npy_type_bytes(&ty) + 1);
            fill_pattern(ty.dtype, data, count);
            char path[128], name[64];
            snprintf(name, sizeof name, "kiln_%d_%d.npy", t, s);
            ck_assert_int_eq(npy_write_file(tmppath(path, sizeof path, name), &ty, data), KILN_OK);
            free(data);
        }
    }
    ck_assert_msg(run_script(python, "check") == 0, "numpy disagrees with kiln's files");
    remove_tmpdir();
}
END_TEST

static Suite *
npy_suite(void)
{
    Suite *s = suite_create("npy");
    TCase *tc = tcase_create("npy");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_header_bytes);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_header_variants);
    tcase_add_test(tc, test_bool_normalised);
    tcase_add_test(tc, test_malformed);
    tcase_add_test(tc, test_malformed_preamble);
    tcase_add_test(tc, test_file_errors);
    tcase_add_test(tc, test_oom);
    tcase_add_test(tc, test_numpy_oracle);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return ts_run(npy_suite());
}
