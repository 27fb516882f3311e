/* shape.c — shapes: overflow-checked sizes, NumPy broadcasting, slices, printing. */
#include <stdio.h>
#include <string.h>

#include "ir.h"

/* ir_shape_check's errors, out of its loop (the check runs for every op's result type;
 * a 256-byte buffer for the message cost it on every call).  A negative dim is reported
 * before a count too large, whichever comes first. */
static kiln_status __attribute__((noinline, cold))
shape_error(const char *api, kiln_dtype t, const ir_shape *s)
{
    char buf[IR_TYPE_STR_MAX];
    if (s->rank < 0 || s->rank > IR_MAX_RANK)
        return ir_error(KILN_ERR_SHAPE, "%s: bad rank: %d (must be 0 to %d)", api, s->rank,
                        IR_MAX_RANK);
    for (int i = 0; i < s->rank; i++)
        if (s->dims[i] < 0)
            return ir_error(KILN_ERR_SHAPE, "%s: negative dimension: %s", api,
                            ir_shape_str(s, buf, sizeof buf));
    return ir_error(KILN_ERR_OVERFLOW, "%s: tensor too large: %s %s exceeds 2^48 bytes", api,
                    kiln_dtype_name(t), ir_shape_str(s, buf, sizeof buf));
}

kiln_status
ir_shape_check(const char *api, kiln_dtype t, const ir_shape *s)
{
    if (s->rank < 0 || s->rank > IR_MAX_RANK)
        return shape_error(api, t, s);
    /* The product of the non-zero dims is bounded even when a zero dim makes the tensor
     * empty: strides and index arithmetic multiply the other dims regardless.  Each
     * factor and the running product stay <= 2^48 before the next multiply, and the
     * multiply is checked for wrapping (not by a division: every op's type rule checks its
     * result, and a 64-bit division per dim was a tenth of the check). */
    uint64_t count = 1;
    for (int i = 0; i < s->rank; i++) {
        int64_t d = s->dims[i];
        if (d <= 0) {
            if (d < 0)
                return shape_error(api, t, s);
            continue;
        }
        if ((uint64_t)d > IR_MAX_BYTES || __builtin_mul_overflow(count, (uint64_t)d, &count) ||
            count > IR_MAX_BYTES)
            return shape_error(api, t, s);
    }
    if (count * kiln_dtype_size(t) > IR_MAX_BYTES)
        return shape_error(api, t, s);
    return KILN_OK;
}

size_t
ir_shape_count(const ir_shape *s)
{
    size_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= (size_t)s->dims[i];
    return n;
}

size_t
ir_type_bytes(const ir_type *t)
{
    return ir_shape_count(&t->shape) * kiln_dtype_size(t->dtype);
}

bool
ir_shape_equal(const ir_shape *a, const ir_shape *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

bool
ir_type_equal(const ir_type *a, const ir_type *b)
{
    return a->dtype == b->dtype && ir_shape_equal(&a->shape, &b->shape);
}

bool
ir_broadcast(const ir_shape *a, const ir_shape *b, ir_shape *out)
{
    ir_shape r;
    r.rank = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < r.rank; i++) {
        /* Align from the right. */
        int ia = a->rank - r.rank + i, ib = b->rank - r.rank + i;
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da == db || db == 1)
            r.dims[i] = da;
        else if (da == 1)
            r.dims[i] = db;
        else
            return false;
    }
    *out = r;
    return true;
}

void
ir_shape_strides(const ir_shape *s, int64_t *st)
{
    int64_t k = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        st[i] = k;
        k *= s->dims[i];
    }
}

void
ir_broadcast_strides(const ir_shape *operand, int rank, int64_t *strides)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        int io = operand->rank - rank + i;
        int64_t d = io >= 0 ? operand->dims[io] : 1;
        strides[i] = d == 1 ? 0 : s;
        s *= d;
    }
}

void
ir_slice_axis(int64_t n, int64_t start, int64_t stop, int64_t step, int64_t *first,
              int64_t *count)
{
    /* Python's PySlice_AdjustIndices, with step != 0. */
    if (start < 0) {
        start += n;
        if (start < 0)
            start = step < 0 ? -1 : 0;
    } else if (start >= n) {
        start = step < 0 ? n - 1 : n;
    }
    if (stop < 0) {
        stop += n;
        if (stop < 0)
            stop = step < 0 ? -1 : 0;
    } else if (stop >= n) {
        stop = step < 0 ? n - 1 : n;
    }
    /* In unsigned arithmetic: -step overflows for step == INT64_MIN. */
    uint64_t c = 0;
    if (step < 0) {
        if (stop < start)
            c = (uint64_t)(start - stop - 1) / (0 - (uint64_t)step) + 1;
    } else if (start < stop) {
        c = (uint64_t)(stop - start - 1) / (uint64_t)step + 1;
    }
    *first = start;
    *count = (int64_t)c;
}

char *
ir_shape_str(const ir_shape *s, char *buf, size_t n)
{
    /* Messages may describe a corrupt type: never read past dims[]. */
    if (s->rank < 0 || s->rank > IR_MAX_RANK) {
        snprintf(buf, n, "[<rank %d>]", s->rank);
        return buf;
    }
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < s->rank && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ",%lld" : "%lld", (long long)s->dims[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

char *
ir_type_str(const ir_type *t, char *buf, size_t n)
{
    char sh[IR_TYPE_STR_MAX];
    snprintf(buf, n, "%s%s", kiln_dtype_name(t->dtype), ir_shape_str(&t->shape, sh, sizeof sh));
    return buf;
}
