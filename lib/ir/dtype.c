/* dtype.c — element types, element access and the conversion rules of the CAST row of
 * ops.def: float->int truncates toward zero and saturates (NaN -> 0), int->int wraps,
 * ->bool is x != 0, bool->x is 0 or 1, narrowing float conversion rounds to nearest even. */
#include <math.h>
#include <string.h>

#include "ir.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[KILN_DTYPE_COUNT] = {
#define X(E, name, size) [KILN_DTYPE_##E] = {#name, size},
    KILN_DTYPE_LIST(X)
#undef X
};

bool
ir_dtype_is_valid(int t)
{
    return t >= 0 && t < KILN_DTYPE_COUNT;
}

const char *
kiln_dtype_name(kiln_dtype t)
{
    return ir_dtype_is_valid((int)t) ? dtypes[t].name : "?";
}

size_t
kiln_dtype_size(kiln_dtype t)
{
    return ir_dtype_is_valid((int)t) ? dtypes[t].size : 0;
}

bool
ir_dtype_is_float(kiln_dtype t)
{
    return t == KILN_DTYPE_F32 || t == KILN_DTYPE_F64;
}

bool
ir_dtype_is_int(kiln_dtype t)
{
    return t == KILN_DTYPE_I32 || t == KILN_DTYPE_I64;
}

int
ir_dtype_from_name(const char *s, size_t n)
{
    for (int t = 0; t < KILN_DTYPE_COUNT; t++)
        if (strlen(dtypes[t].name) == n && memcmp(dtypes[t].name, s, n) == 0)
            return t;
    return -1;
}

/* Saturating truncation toward zero; NaN gives 0. */
static int64_t
f64_to_int(double v, int64_t lo, int64_t hi)
{
    if (isnan(v))
        return 0;
    if (v <= (double)lo)
        return lo;
    /* (double)INT64_MAX rounds up to 2^63, itself out of range, so >= saturates exactly
     * the values that do not fit; (double)INT32_MAX is exact and >= is right as well. */
    if (v >= (double)hi)
        return hi;
    return (int64_t)v;
}

double
ir_load_f64(kiln_dtype t, const void *base, size_t i)
{
    switch (t) {
    case KILN_DTYPE_F32: { float v; memcpy(&v, (const char *)base + 4 * i, 4); return v; }
    case KILN_DTYPE_F64: { double v; memcpy(&v, (const char *)base + 8 * i, 8); return v; }
    case KILN_DTYPE_I32: { int32_t v; memcpy(&v, (const char *)base + 4 * i, 4); return v; }
    case KILN_DTYPE_I64: { int64_t v; memcpy(&v, (const char *)base + 8 * i, 8); return (double)v; }
    case KILN_DTYPE_BOOL: return ((const uint8_t *)base)[i] ? 1.0 : 0.0;
    default: IR_ASSERT(!"bad dtype");
    }
}

int64_t
ir_load_i64(kiln_dtype t, const void *base, size_t i)
{
    switch (t) {
    case KILN_DTYPE_F32:
    case KILN_DTYPE_F64: return f64_to_int(ir_load_f64(t, base, i), INT64_MIN, INT64_MAX);
    case KILN_DTYPE_I32: { int32_t v; memcpy(&v, (const char *)base + 4 * i, 4); return v; }
    case KILN_DTYPE_I64: { int64_t v; memcpy(&v, (const char *)base + 8 * i, 8); return v; }
    case KILN_DTYPE_BOOL: return ((const uint8_t *)base)[i] ? 1 : 0;
    default: IR_ASSERT(!"bad dtype");
    }
}

void
ir_store_f64(kiln_dtype t, void *base, size_t i, double v)
{
    switch (t) {
    case KILN_DTYPE_F32: { float f = (float)v; memcpy((char *)base + 4 * i, &f, 4); break; }
    case KILN_DTYPE_F64: memcpy((char *)base + 8 * i, &v, 8); break;
    case KILN_DTYPE_I32: { int32_t x = (int32_t)f64_to_int(v, INT32_MIN, INT32_MAX); memcpy((char *)base + 4 * i, &x, 4); break; }
    case KILN_DTYPE_I64: { int64_t x = f64_to_int(v, INT64_MIN, INT64_MAX); memcpy((char *)base + 8 * i, &x, 8); break; }
    case KILN_DTYPE_BOOL: ((uint8_t *)base)[i] = v != 0.0; break; /* NaN != 0 */
    default: IR_ASSERT(!"bad dtype");
    }
}

void
ir_store_i64(kiln_dtype t, void *base, size_t i, int64_t v)
{
    switch (t) {
    case KILN_DTYPE_F32: { float f = (float)v; memcpy((char *)base + 4 * i, &f, 4); break; }
    case KILN_DTYPE_F64: { double d = (double)v; memcpy((char *)base + 8 * i, &d, 8); break; }
    case KILN_DTYPE_I32: { int32_t x = (int32_t)(uint32_t)(uint64_t)v; memcpy((char *)base + 4 * i, &x, 4); break; }
    case KILN_DTYPE_I64: memcpy((char *)base + 8 * i, &v, 8); break;
    case KILN_DTYPE_BOOL: ((uint8_t *)base)[i] = v != 0; break;
    default: IR_ASSERT(!"bad dtype");
    }
}

void
ir_convert(kiln_dtype to, void *dst, size_t j, kiln_dtype from, const void *src, size_t i)
{
    if (from == to) {
        size_t s = kiln_dtype_size(to);
        memcpy((char *)dst + s * j, (const char *)src + s * i, s);
    } else if (ir_dtype_is_float(from)) {
        ir_store_f64(to, dst, j, ir_load_f64(from, src, i));
    } else {
        ir_store_i64(to, dst, j, ir_load_i64(from, src, i));
    }
}

double
ir_scalar_f64(kiln_dtype t, const ir_scalar *s)
{
    return ir_load_f64(t, s->bytes, 0);
}

int64_t
ir_scalar_i64(kiln_dtype t, const ir_scalar *s)
{
    return ir_load_i64(t, s->bytes, 0);
}

ir_scalar
ir_scalar_from_f64(kiln_dtype t, double v)
{
    ir_scalar s = {{0}};
    ir_store_f64(t, s.bytes, 0, v);
    return s;
}

ir_scalar
ir_scalar_from_i64(kiln_dtype t, int64_t v)
{
    ir_scalar s = {{0}};
    ir_store_i64(t, s.bytes, 0, v);
    return s;
}
