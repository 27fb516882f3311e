/* npy.c — reading and writing NumPy .npy files (see npy.h for what is accepted).
 *
 * File layout (numpy/lib/format.py, NEP 1):
 *   "\x93NUMPY" major minor   6 + 2 bytes
 *   HEADER_LEN                u16 little-endian (1.0) or u32 (2.0, 3.0)
 *   HEADER                    a Python dict literal, latin-1 (1.0, 2.0) or UTF-8 (3.0),
 *                             padded with spaces and a final '\n' so that the data starts at
 *                             a multiple of 64 (16 in numpy before 1.14: any length is read)
 *   DATA                      count * itemsize bytes
 * kiln needs only ASCII in the header (its keys and dtype codes are ASCII), so the three
 * versions differ only in the width of HEADER_LEN.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "npy.h"

#include "ir.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kiln's .npy code copies elements as they are: it needs a little-endian host"
#endif

#define MAGIC "\x93NUMPY"
#define MAGIC_LEN 6

/* The descr numpy writes for each kiln dtype. */
static const char *const descr_of[KILN_DTYPE_COUNT] = {
    [KILN_DTYPE_F32] = "<f4", [KILN_DTYPE_F64] = "<f8",  [KILN_DTYPE_I32] = "<i4",
    [KILN_DTYPE_I64] = "<i8", [KILN_DTYPE_BOOL] = "|b1",
};

/* npy_type and ir_type spell the same thing; the checks and sizes are lib/ir's. */
static ir_type
to_ir(const npy_type *t)
{
    ir_type it = {.dtype = t->dtype, .shape = {.rank = t->shape.rank}};
    for (int i = 0; i < t->shape.rank && i < IR_MAX_RANK; i++)
        it.shape.dims[i] = t->shape.dims[i];
    return it;
}

static npy_type
from_ir(const ir_type *it)
{
    npy_type t = {.dtype = it->dtype, .shape = {.rank = it->shape.rank}};
    for (int i = 0; i < it->shape.rank && i < KILN_MAX_RANK; i++)
        t.shape.dims[i] = it->shape.dims[i];
    return t;
}

size_t
npy_type_count(const npy_type *t)
{
    ir_type it = to_ir(t);
    return ir_shape_count(&it.shape);
}

size_t
npy_type_bytes(const npy_type *t)
{
    ir_type it = to_ir(t);
    return ir_type_bytes(&it);
}

bool
npy_type_equal(const npy_type *a, const npy_type *b)
{
    ir_type x = to_ir(a), y = to_ir(b);
    return ir_type_equal(&x, &y);
}

void
npy_array_free(npy_array *a)
{
    if (!a)
        return;
    ir_free(a->data);
    memset(a, 0, sizeof *a);
}

/* ---- the header dict ------------------------------------------------------------------ */

/* A cursor over the header text; errors name the file and the offset in the header. */
typedef struct hparser {
    const char *s;
    size_t n, i;
    const char *name;
} hparser;

static kiln_status
bad_header(hparser *p, const char *what)
{
    if (p->i >= p->n)
        return ir_error(KILN_ERR_FORMAT, "%s: bad header: %s at the end of the header", p->name,
                        what);
    unsigned char c = (unsigned char)p->s[p->i];
    if (c >= 0x20 && c < 0x7f)
        return ir_error(KILN_ERR_FORMAT, "%s: bad header: %s at header offset %zu (found '%c')",
                        p->name, what, p->i, c);
    return ir_error(KILN_ERR_FORMAT, "%s: bad header: %s at header offset %zu (found byte 0x%02x)",
                    p->name, what, p->i, c);
}

static void
skip_ws(hparser *p)
{
    while (p->i < p->n &&
           (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static bool
eat(hparser *p, char c)
{
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == c) {
        p->i++;
        return true;
    }
    return false;
}

static bool
eat_word(hparser *p, const char *w)
{
    size_t n = strlen(w);
    if (p->n - p->i < n || memcmp(p->s + p->i, w, n) != 0)
        return false;
    /* "Truex" is not True. */
    if (p->i + n < p->n) {
        char c = p->s[p->i + n];
        if (c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            return false;
    }
    p->i += n;
    return true;
}

/* string = "'" chars "'" | '"' chars '"'   (no escapes: kiln's keys and codes need none) */
static kiln_status
parse_string(hparser *p, const char **s, size_t *n)
{
    skip_ws(p);
    if (p->i >= p->n || (p->s[p->i] != '\'' && p->s[p->i] != '"'))
        return bad_header(p, "expected a quoted string");
    char q = p->s[p->i++];
    size_t start = p->i;
    while (p->i < p->n && p->s[p->i] != q) {
        char c = p->s[p->i];
        if (c == '\\' || c == '\n' || (unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
            return bad_header(p, "unsupported character in a string");
        p->i++;
    }
    if (p->i >= p->n)
        return bad_header(p, "unterminated string");
    *s = p->s + start;
    *n = p->i - start;
    p->i++;
    return KILN_OK;
}

/* int = ["-"] digit+ ["L"]   (Python 2 era files wrote long dims as 3L) */
static kiln_status
parse_dim(hparser *p, int64_t *out)
{
    skip_ws(p);
    bool neg = p->i < p->n && p->s[p->i] == '-';
    if (neg)
        p->i++;
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
        return bad_header(p, "expected an integer dimension");
    uint64_t v = 0;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
        unsigned d = (unsigned)(p->s[p->i] - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            return ir_error(KILN_ERR_OVERFLOW, "%s: bad shape: a dimension exceeds 2^63", p->name);
        v = v * 10 + d;
        p->i++;
    }
    if (p->i < p->n && p->s[p->i] == 'L')
        p->i++;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return KILN_OK;
}

/* tuple = "(" ")" | "(" int "," ")" | "(" int ("," int)+ [","] ")"
 * A parenthesised int without a comma is an int in Python, not a tuple. */
static kiln_status
parse_shape(hparser *p, ir_shape *shape)
{
    kiln_status st;
    if (!eat(p, '('))
        return bad_header(p, "shape: expected a tuple");
    shape->rank = 0;
    if (eat(p, ')'))
        return KILN_OK;
    for (;;) {
        int64_t d = 0;
        if ((st = parse_dim(p, &d)))
            return st;
        if (shape->rank == IR_MAX_RANK)
            return ir_error(KILN_ERR_SHAPE, "%s: bad shape: rank above %d (kiln's maximum)",
                            p->name, IR_MAX_RANK);
        shape->dims[shape->rank++] = d;
        if (eat(p, ')')) {
            if (shape->rank == 1)
                return bad_header(p, "shape: (N) is not a tuple, expected (N,)");
            return KILN_OK;
        }
        if (!eat(p, ','))
            return bad_header(p, "shape: expected ',' or ')'");
        if (eat(p, ')'))
            return KILN_OK;
    }
}

static bool
str_is(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* Map a descr string to a kiln dtype, explaining the ones kiln cannot hold. */
static kiln_status
parse_descr(hparser *p, const char *s, size_t n, kiln_dtype *out)
{
    for (int t = 0; t < KILN_DTYPE_COUNT; t++)
        if (str_is(s, n, descr_of[t])) {
            *out = (kiln_dtype)t;
            return KILN_OK;
        }
    /* Byte order does not apply to one-byte bools; numpy itself reads '<b1'. */
    if (str_is(s, n, "<b1")) {
        *out = KILN_DTYPE_BOOL;
        return KILN_OK;
    }
    const char *why = "kiln reads '<f4' '<f8' '<i4' '<i8' '|b1'";
    if (n >= 2 && s[0] == '>' && s[1] != 'O')
        why = "big-endian data (kiln reads little-endian only; save "
              "a.astype(a.dtype.newbyteorder('<')))";
    else if (n >= 2 && (s[0] == '|' || s[0] == '<' || s[0] == '>' || s[0] == '=') && s[1] == 'O')
        why = "object arrays hold Python objects, not numbers";
    return ir_error(KILN_ERR_DTYPE, "%s: unsupported dtype: '%.*s': %s", p->name, (int)n, s, why);
}

/* header = "{" [item ("," item)* [","]] "}" whitespace*
 * item   = string ":" value, for exactly the keys descr, fortran_order and shape. */
static kiln_status
parse_header(const char *text, size_t len, const char *name, ir_type *type)
{
    hparser p = {.s = text, .n = len, .i = 0, .name = name};
    hparser *pp = &p;
    kiln_status st;
    bool have_descr = false, have_order = false, have_shape = false, fortran = false;
    if (!eat(pp, '{'))
        return bad_header(pp, "expected '{' (the header is a Python dict)");
    while (!eat(pp, '}')) {
        const char *key;
        size_t kn;
        if ((st = parse_string(pp, &key, &kn)))
            return st;
        if (!eat(pp, ':'))
            return bad_header(pp, "expected ':' after a key");
        skip_ws(pp);
        bool *seen;
        if (str_is(key, kn, "descr")) {
            seen = &have_descr;
            if (p.i < p.n && p.s[p.i] == '[')
                return ir_error(KILN_ERR_DTYPE,
                                "%s: unsupported dtype: structured arrays (a list descr) are "
                                "not supported",
                                name);
            const char *d;
            size_t dn;
            if ((st = parse_string(pp, &d, &dn)) || (st = parse_descr(pp, d, dn, &type->dtype)))
                return st;
        } else if (str_is(key, kn, "fortran_order")) {
            seen = &have_order;
            if (eat_word(pp, "True"))
                fortran = true;
            else if (eat_word(pp, "False"))
                fortran = false;
            else
                return bad_header(pp, "fortran_order: expected True or False");
        } else if (str_is(key, kn, "shape")) {
            seen = &have_shape;
            if ((st = parse_shape(pp, &type->shape)))
                return st;
        } else {
            return ir_error(KILN_ERR_FORMAT, "%s: bad header: unknown key '%.*s'", name, (int)kn,
                            key);
        }
        if (*seen)
            return ir_error(KILN_ERR_FORMAT, "%s: bad header: duplicate key '%.*s'", name, (int)kn,
                            key);
        *seen = true;
        if (eat(pp, '}'))
            break;
        if (!eat(pp, ','))
            return bad_header(pp, "expected ',' or '}'");
    }
    skip_ws(pp);
    if (p.i != p.n)
        return bad_header(pp, "unexpected text after the dict");
    const char *missing = !have_descr ? "descr" : !have_order ? "fortran_order" : "shape";
    if (!have_descr || !have_order || !have_shape)
        return ir_error(KILN_ERR_FORMAT, "%s: bad header: missing key '%s'", name, missing);
    if (fortran)
        return ir_error(KILN_ERR_UNSUPPORTED,
                        "%s: unsupported layout: fortran_order is True (kiln reads C order; "
                        "save np.ascontiguousarray(a))",
                        name);
    return ir_shape_check(name, type->dtype, &type->shape);
}

/* Check the preamble and header of a whole-file image: the type and where the data starts. */
static kiln_status
parse_image(const unsigned char *buf, size_t len, const char *name, ir_type *type, size_t *data_off)
{
    if (len < MAGIC_LEN || memcmp(buf, MAGIC, MAGIC_LEN) != 0)
        return ir_error(KILN_ERR_FORMAT, "%s: not a .npy file: bad magic (expected \\x93NUMPY)",
                        name);
    if (len < MAGIC_LEN + 2)
        return ir_error(KILN_ERR_FORMAT, "%s: truncated header: the file ends in the version",
                        name);
    unsigned major = buf[6], minor = buf[7];
    if (major < 1 || major > 3 || minor != 0)
        return ir_error(KILN_ERR_FORMAT,
                        "%s: unsupported .npy version: %u.%u (kiln reads 1.0, 2.0, 3.0)", name,
                        major, minor);
    size_t lenbytes = major == 1 ? 2 : 4;
    if (len < MAGIC_LEN + 2 + lenbytes)
        return ir_error(KILN_ERR_FORMAT, "%s: truncated header: the file ends in the header length",
                        name);
    const unsigned char *q = buf + MAGIC_LEN + 2;
    uint64_t hlen = major == 1 ? (uint64_t)q[0] | (uint64_t)q[1] << 8
                               : (uint64_t)q[0] | (uint64_t)q[1] << 8 | (uint64_t)q[2] << 16 |
                                     (uint64_t)q[3] << 24;
    size_t off = MAGIC_LEN + 2 + lenbytes;
    if (hlen > len - off)
        return ir_error(KILN_ERR_FORMAT,
                        "%s: truncated header: header length %" PRIu64 " but %zu bytes follow",
                        name, hlen, len - off);
    const char *text = (const char *)buf + off;
    if (memchr(text, '\0', hlen))
        return ir_error(KILN_ERR_FORMAT, "%s: bad header: it contains a NUL byte", name);
    kiln_status st = parse_header(text, hlen, name, type);
    if (st)
        return st;
    off += hlen;
    size_t need = ir_type_bytes(type);
    if (len - off < need)
        return ir_error(KILN_ERR_FORMAT, "%s: truncated data: expected %zu bytes, got %zu", name,
                        need, len - off);
    if (len - off > need)
        return ir_error(KILN_ERR_FORMAT,
                        "%s: trailing data: %zu bytes after the %zu bytes of the array", name,
                        len - off - need, need);
    *data_off = off;
    return KILN_OK;
}

static void
fill(npy_array *out, const ir_type *type, void *data)
{
    out->type = from_ir(type);
    out->count = ir_shape_count(&type->shape);
    out->bytes = ir_type_bytes(type);
    out->data = data;
    if (type->dtype == KILN_DTYPE_BOOL) {
        /* numpy reads any non-zero byte as True; kiln's bools are exactly 0 or 1. */
        unsigned char *b = data;
        for (size_t i = 0; i < out->count; i++)
            b[i] = b[i] != 0;
    }
}

kiln_status
npy_read_mem(const void *buf, size_t len, const char *name, npy_array *out)
{
    memset(out, 0, sizeof *out);
    ir_type type = {0};
    size_t off = 0;
    kiln_status st = parse_image(buf, len, name, &type, &off);
    if (st)
        return st;
    size_t bytes = ir_type_bytes(&type);
    void *data = ir_malloc(bytes);
    if (!data)
        return ir_error(KILN_ERR_NOMEM, "%s: out of memory: %zu bytes", name, bytes);
    memcpy(data, (const unsigned char *)buf + off, bytes);
    fill(out, &type, data);
    return KILN_OK;
}

/* Read all of f into one buffer; `hint` is the expected size (0 when unknown). */
static kiln_status
slurp(FILE *f, const char *name, size_t hint, unsigned char **buf, size_t *len)
{
    size_t cap = hint ? hint + 1 : 4096, n = 0;
    unsigned char *b = ir_malloc(cap);
    if (!b)
        return ir_error(KILN_ERR_NOMEM, "%s: out of memory: %zu bytes", name, cap);
    for (;;) {
        if (n == cap) {
            size_t ncap = cap * 2;
            unsigned char *nb = ncap > cap ? ir_realloc(b, ncap) : NULL;
            if (!nb) {
                ir_free(b);
                return ir_error(KILN_ERR_NOMEM, "%s: out of memory: %zu bytes", name, ncap);
            }
            b = nb;
            cap = ncap;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                int e = errno;
                ir_free(b);
                return ir_error(KILN_ERR_IO, "%s: read failed: %s", name,
                                e ? strerror(e) : "i/o error");
            }
            break;
        }
    }
    *buf = b;
    *len = n;
    return KILN_OK;
}

kiln_status
npy_read_file(const char *path, npy_array *out)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f)
        return ir_error(KILN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    size_t hint = 0;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
        (uint64_t)sb.st_size < IR_MAX_BYTES + 4096)
        hint = (size_t)sb.st_size;
    unsigned char *buf = NULL;
    size_t len = 0;
    errno = 0;
    kiln_status st = slurp(f, path, hint, &buf, &len);
    fclose(f);
    if (st)
        return st;
    ir_type type = {0};
    size_t off = 0;
    if ((st = parse_image(buf, len, path, &type, &off))) {
        ir_free(buf);
        return st;
    }
    /* The data moves to the front of the buffer: one copy of the file in memory at most. */
    size_t bytes = ir_type_bytes(&type);
    memmove(buf, buf + off, bytes);
    unsigned char *shrunk = ir_realloc(buf, bytes);
    fill(out, &type, shrunk ? shrunk : buf);
    return KILN_OK;
}

/* ---- writing ------------------------------------------------------------------------ */

size_t
npy_header(const npy_type *type, char *buf)
{
    /* numpy's _write_array_header: sorted keys, repr() of each value, then spare spaces
     * so the first axis can grow in place (GROWTH_AXIS_MAX_DIGITS = 21, numpy >= 1.23),
     * then padding so that magic + length + dict + '\n' is a multiple of 64. */
    char dict[NPY_HEADER_MAX];
    size_t n = 0;
    n += (size_t)snprintf(dict + n, sizeof dict - n,
                          "{'descr': '%s', 'fortran_order': False, 'shape': (",
                          descr_of[type->dtype]);
    for (int i = 0; i < type->shape.rank; i++)
        n += (size_t)snprintf(dict + n, sizeof dict - n, "%s%" PRId64, i ? ", " : "",
                              type->shape.dims[i]);
    n += (size_t)snprintf(dict + n, sizeof dict - n, "%s), }", type->shape.rank == 1 ? "," : "");
    if (type->shape.rank > 0) {
        char first[32];
        int digits = snprintf(first, sizeof first, "%" PRId64, type->shape.dims[0]);
        for (int i = digits; i < 21; i++)
            dict[n++] = ' ';
    }
    size_t total = MAGIC_LEN + 2 + 2 + n + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = n + pad + 1;
    memcpy(buf, MAGIC, MAGIC_LEN);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (char)(hlen & 0xff);
    buf[9] = (char)(hlen >> 8);
    memcpy(buf + 10, dict, n);
    memset(buf + 10 + n, ' ', pad);
    buf[10 + n + pad] = '\n';
    return 10 + hlen;
}

kiln_status
npy_write_stream(FILE *f, const char *name, const npy_type *type, const void *data)
{
    if (!ir_dtype_is_valid((int)type->dtype))
        return ir_error(KILN_ERR_INVALID_ARG, "%s: cannot write: invalid dtype %d", name,
                        (int)type->dtype);
    ir_type it = to_ir(type);
    if (type->shape.rank > KILN_MAX_RANK)
        it.shape.rank = type->shape.rank; /* refused by the check, with the rank */
    kiln_status st = ir_shape_check(name, it.dtype, &it.shape);
    if (st)
        return st;
    char hdr[NPY_HEADER_MAX];
    size_t hn = npy_header(type, hdr);
    size_t bytes = ir_type_bytes(&it);
    errno = 0;
    if (fwrite(hdr, 1, hn, f) != hn || (bytes && fwrite(data, 1, bytes, f) != bytes) ||
        fflush(f) != 0)
        return ir_error(KILN_ERR_IO, "%s: write failed: %s", name,
                        errno ? strerror(errno) : "i/o error");
    return KILN_OK;
}

kiln_status
npy_write_file(const char *path, const npy_type *type, const void *data)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return ir_error(KILN_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    kiln_status st = npy_write_stream(f, path, type, data);
    if (fclose(f) != 0 && !st)
        st = ir_error(KILN_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    if (st)
        remove(path);
    return st;
}
