/* record.c — the tensor API: every call goes through the router (creation ops, by device)
 * or through its operands' scope (ops on tensors), and appends one node to the scope's
 * graph.  Refused calls record nothing.  The per-op entry points are generated from the
 * op table where their signatures are uniform; a unary or binary op added to ops.def
 * without a declaration in kiln.h fails to compile (-Wmissing-prototypes is an error). */
#pragma GCC diagnostic error "-Wmissing-prototypes"

#include <stdint.h>
#include <string.h>

#include "capture.h"

/* One recording in progress: holds cap_lock from rec_begin to rec_finish/rec_fail. */
typedef struct rec {
    const char *api;
    cap_scope *s;
    int nin;
    int32_t small[4];
    int32_t *in;
} rec;

static kiln_tensor
rec_fail(rec *r)
{
    if (r->s)
        cap_scope_fail_locked(r->s);
    cap_unlock();
    if (r->in != r->small)
        ir_free(r->in);
    return (kiln_tensor){0, 0, 0};
}

/* The live scope of a well-formed tensor, or NULL; sets no error. */
static cap_scope *
live_scope_locked(kiln_tensor t)
{
    if (t.scope == 0 || t.check != cap_tensor_check(t.scope, t.node))
        return NULL;
    return cap_scope_find_locked(t.scope);
}

/* Lock and resolve the operands of an op on tensors; false (unlocked, error set) on
 * failure. */
static bool
rec_begin(rec *r, const char *api, int n, const kiln_tensor *xs)
{
    r->api = api;
    r->s = NULL;
    r->nin = n;
    r->in = r->small;
    if (n > (int)(sizeof r->small / sizeof r->small[0])) {
        r->in = ir_malloc(sizeof(int32_t) * (size_t)n);
        if (!r->in) {
            /* Sticky in the operands' scope like any other failure of the op. */
            r->in = r->small;
            ir_error(KILN_ERR_NOMEM, "%s: out of memory", api);
            cap_lock();
            for (int j = 0; j < n && !r->s; j++)
                r->s = live_scope_locked(xs[j]);
            rec_fail(r);
            return false;
        }
    }
    cap_lock();
    for (int i = 0; i < n; i++) {
        cap_scope *s;
        if (cap_tensor_resolve_locked(api, xs[i], n > 1 ? i + 1 : 0, &s)) {
            /* The op failed in whichever live scope its other operands belong to: make the
             * error sticky there too, whatever the operand order (add(stale, x) and
             * add(x, stale) both poison x's scope). */
            for (int j = i + 1; j < n && !r->s; j++)
                r->s = live_scope_locked(xs[j]);
            rec_fail(r);
            return false;
        }
        if (r->s && s != r->s) {
            ir_error(KILN_ERR_FOREIGN_TENSOR,
                     "%s: tensor belongs to another scope: operand %d is from scope %llu, "
                     "operand 1 from scope %llu",
                     api, i + 1, (unsigned long long)s->serial,
                     (unsigned long long)r->s->serial);
            rec_fail(r);
            return false;
        }
        r->s = s;
        r->in[i] = (int32_t)xs[i].node;
    }
    return true;
}

/* Lock and find the scope registered for the device (creation ops). */
static bool
rec_begin_device(rec *r, const char *api, kiln_device *d)
{
    void *client;
    r->api = api;
    r->s = NULL;
    r->nin = 0;
    r->in = r->small;
    cap_lock();
    if (cap_device_check(d, api) ||
        cap_router_get_client_locked(&cap_capture_channel, d->id, api, &client)) {
        rec_fail(r);
        return false;
    }
    r->s = client;
    return true;
}

static const ir_type *
rec_type(const rec *r, int i)
{
    return &r->s->graph->nodes[r->in[i]].type;
}

static kiln_tensor
rec_finish(rec *r, ir_op op, const ir_attrs *at, const ir_type *given)
{
    int32_t id = ir_graph_add_node(r->s->graph, r->api, op, r->nin, r->in, at, given, NULL);
    if (id < 0)
        return rec_fail(r);
    kiln_tensor t = cap_tensor_make(r->s, id);
    cap_unlock();
    if (r->in != r->small)
        ir_free(r->in);
    return t;
}

static kiln_tensor
record(const char *api, ir_op op, int n, const kiln_tensor *xs, const ir_attrs *at)
{
    rec r;
    if (!rec_begin(&r, api, n, xs))
        return (kiln_tensor){0, 0, 0};
    return rec_finish(&r, op, at, NULL);
}

/* ---- creation ------------------------------------------------------------------------- */

static kiln_status
make_type(const char *api, kiln_dtype dtype, int rank, const int64_t *dims, ir_type *t)
{
    if (!ir_dtype_is_valid((int)dtype))
        return ir_error(KILN_ERR_DTYPE, "%s: bad dtype: %d", api, (int)dtype);
    if (rank < 0 || rank > IR_MAX_RANK)
        return ir_error(KILN_ERR_SHAPE, "%s: bad rank: %d (must be 0 to %d)", api, rank,
                        IR_MAX_RANK);
    if (rank > 0 && !dims)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: invalid argument: dims is NULL", api);
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->shape.rank = rank;
    for (int i = 0; i < rank; i++)
        t->shape.dims[i] = dims[i];
    return ir_shape_check(api, dtype, &t->shape);
}

kiln_tensor
kiln_input(kiln_device *d, const char *name, kiln_dtype dtype, int rank, const int64_t *dims)
{
    rec r;
    ir_type t;
    if (!rec_begin_device(&r, "kiln_input", d))
        return (kiln_tensor){0, 0, 0};
    if (make_type(r.api, dtype, rank, dims, &t))
        return rec_fail(&r);
    int32_t id = ir_graph_add_input(r.s->graph, name, &t);
    if (id < 0)
        return rec_fail(&r);
    kiln_tensor x = cap_tensor_make(r.s, id);
    cap_unlock();
    return x;
}

static kiln_tensor
source(rec *r, ir_op op, kiln_dtype dtype, int rank, const int64_t *dims, ir_attrs *at)
{
    ir_type t;
    if (make_type(r->api, dtype, rank, dims, &t))
        return rec_fail(r);
    return rec_finish(r, op, at, &t);
}

kiln_tensor
kiln_constant(kiln_device *d, kiln_dtype dtype, int rank, const int64_t *dims, const void *data)
{
    rec r;
    ir_attrs at = {0};
    if (!rec_begin_device(&r, "kiln_constant", d))
        return (kiln_tensor){0, 0, 0};
    at.data = (void *)data;
    return source(&r, IR_OP_CONSTANT, dtype, rank, dims, &at);
}

static kiln_tensor
full(rec *r, kiln_dtype dtype, int rank, const int64_t *dims, double value)
{
    ir_attrs at = {0};
    if (ir_dtype_is_valid((int)dtype))
        at.value = ir_scalar_from_f64(dtype, value);
    return source(r, IR_OP_FULL, dtype, rank, dims, &at);
}

kiln_tensor
kiln_full(kiln_device *d, kiln_dtype dtype, int rank, const int64_t *dims, double value)
{
    rec r;
    if (!rec_begin_device(&r, "kiln_full", d))
        return (kiln_tensor){0, 0, 0};
    return full(&r, dtype, rank, dims, value);
}

kiln_tensor
kiln_scalar(kiln_device *d, kiln_dtype dtype, double value)
{
    rec r;
    if (!rec_begin_device(&r, "kiln_scalar", d))
        return (kiln_tensor){0, 0, 0};
    return full(&r, dtype, 0, NULL, value);
}

kiln_tensor
kiln_scalar_like(kiln_tensor like, double value)
{
    rec r;
    if (!rec_begin(&r, "kiln_scalar_like", 1, &like))
        return (kiln_tensor){0, 0, 0};
    kiln_dtype dtype = rec_type(&r, 0)->dtype;
    r.nin = 0; /* a source in like's scope */
    return full(&r, dtype, 0, NULL, value);
}

kiln_tensor
kiln_arange(kiln_device *d, kiln_dtype dtype, int64_t n, double start, double delta)
{
    rec r;
    ir_attrs at = {0};
    if (!rec_begin_device(&r, "kiln_arange", d))
        return (kiln_tensor){0, 0, 0};
    if (ir_dtype_is_valid((int)dtype)) {
        at.start = ir_scalar_from_f64(dtype, start);
        at.delta = ir_scalar_from_f64(dtype, delta);
    }
    return source(&r, IR_OP_ARANGE, dtype, 1, &n, &at);
}

/* ---- elementwise ops, generated from the op table -------------------------------------- */
#define DEF_SOURCE(E, name)
#define DEF_UNARY(E, name)                                                                   \
    kiln_tensor kiln_##name(kiln_tensor x)                                                   \
    {                                                                                        \
        return record("kiln_" #name, IR_OP_##E, 1, &x, NULL);                                \
    }
#define DEF_BINARY(E, name)                                                                  \
    kiln_tensor kiln_##name(kiln_tensor a, kiln_tensor b)                                    \
    {                                                                                        \
        kiln_tensor xs[2] = {a, b};                                                          \
        return record("kiln_" #name, IR_OP_##E, 2, xs, NULL);                                \
    }
#define DEF_TERNARY(E, name)                                                                 \
    kiln_tensor kiln_##name(kiln_tensor a, kiln_tensor b, kiln_tensor c)                     \
    {                                                                                        \
        kiln_tensor xs[3] = {a, b, c};                                                       \
        return record("kiln_" #name, IR_OP_##E, 3, xs, NULL);                                \
    }
#define DEF_REDUCE(E, name)                                                                  \
    kiln_tensor kiln_##name(kiln_tensor x, int naxes, const int *axes, int keepdim)          \
    {                                                                                        \
        return reduce("kiln_" #name, IR_OP_##E, x, naxes, axes, keepdim);                    \
    }
#define DEF_CAST(E, name)
#define DEF_MOVE(E, name)
#define DEF_MATMUL(E, name)                                                                  \
    kiln_tensor kiln_##name(kiln_tensor a, kiln_tensor b)                                    \
    {                                                                                        \
        kiln_tensor xs[2] = {a, b};                                                          \
        return record("kiln_" #name, IR_OP_##E, 2, xs, NULL);                                \
    }

static kiln_tensor
reduce(const char *api, ir_op op, kiln_tensor x, int naxes, const int *axes, int keepdim)
{
    rec r;
    ir_attrs at = {0};
    if (!rec_begin(&r, api, 1, &x))
        return (kiln_tensor){0, 0, 0};
    int rank = rec_type(&r, 0)->shape.rank;
    if (naxes < 0 || (naxes > 0 && !axes)) {
        ir_error(KILN_ERR_INVALID_ARG, "%s: invalid argument: %d axes at %p", api, naxes,
                 (const void *)axes);
        return rec_fail(&r);
    }
    for (int i = 0; i < naxes; i++) {
        int a = axes[i] < 0 ? axes[i] + rank : axes[i];
        if (a < 0 || a >= rank) {
            ir_error(KILN_ERR_SHAPE, "%s: bad axes: axis %d of a rank-%d tensor", api, axes[i],
                     rank);
            return rec_fail(&r);
        }
        if (at.axes & (1u << a)) {
            ir_error(KILN_ERR_SHAPE, "%s: bad axes: axis %d listed twice", api, axes[i]);
            return rec_fail(&r);
        }
        at.axes |= 1u << a;
    }
    at.keepdim = keepdim != 0;
    return rec_finish(&r, op, &at, NULL);
}

#define OP(E, name, arity, kind, trule, attrs, calc, ulp_f32, ulp_f64, meaning) DEF_##kind(E, name)
#include "ops.def"
#undef OP

kiln_tensor
kiln_cast(kiln_tensor x, kiln_dtype to)
{
    ir_attrs at = {0};
    at.to = to;
    return record("kiln_cast", IR_OP_CAST, 1, &x, &at);
}

/* ---- movement --------------------------------------------------------------------------- */

/* Copy `n` dims into a shape attribute, checking the rank. */
static bool
shape_attr(rec *r, int rank, const int64_t *dims, ir_shape *s)
{
    if (rank < 0 || rank > IR_MAX_RANK || (rank > 0 && !dims)) {
        ir_error(KILN_ERR_SHAPE, "%s: bad rank: %d (must be 0 to %d, with dims)", r->api, rank,
                 IR_MAX_RANK);
        return false;
    }
    s->rank = rank;
    for (int i = 0; i < rank; i++)
        s->dims[i] = dims[i];
    return true;
}

kiln_tensor
kiln_reshape(kiln_tensor x, int rank, const int64_t *dims)
{
    rec r;
    ir_attrs at = {0};
    if (!rec_begin(&r, "kiln_reshape", 1, &x))
        return (kiln_tensor){0, 0, 0};
    if (!shape_attr(&r, rank, dims, &at.shape))
        return rec_fail(&r);
    return rec_finish(&r, IR_OP_RESHAPE, &at, NULL);
}

kiln_tensor
kiln_expand(kiln_tensor x, int rank, const int64_t *dims)
{
    rec r;
    ir_attrs at = {0};
    if (!rec_begin(&r, "kiln_expand", 1, &x))
        return (kiln_tensor){0, 0, 0};
    if (!shape_attr(&r, rank, dims, &at.shape))
        return rec_fail(&r);
    return rec_finish(&r, IR_OP_EXPAND, &at, NULL);
}

kiln_tensor
kiln_permute(kiln_tensor x, int rank, const int *perm)
{
    rec r;
    ir_attrs at = {0};
    if (!rec_begin(&r, "kiln_permute", 1, &x))
        return (kiln_tensor){0, 0, 0};
    int xr = rec_type(&r, 0)->shape.rank;
    if (rank != xr || (rank > 0 && !perm)) {
        ir_error(KILN_ERR_SHAPE, "%s: bad perm: %d entries for a rank-%d tensor", r.api, rank, xr);
        return rec_fail(&r);
    }
    for (int i = 0; i < rank; i++)
        at.perm[i] = perm[i];
    return rec_finish(&r, IR_OP_PERMUTE, &at, NULL);
}

kiln_tensor
kiln_slice(kiln_tensor x, const int64_t *start, const int64_t *stop, const int64_t *step)
{
    rec r;
    ir_attrs at = {0};
    if (!rec_begin(&r, "kiln_slice", 1, &x))
        return (kiln_tensor){0, 0, 0};
    int rank = rec_type(&r, 0)->shape.rank;
    for (int i = 0; i < rank; i++) {
        at.step[i] = step ? step[i] : 1;
        /* Python's None: the extremes, which ir_slice_axis clamps by the step's sign. */
        at.begin[i] = start ? start[i] : (at.step[i] < 0 ? INT64_MAX : 0);
        at.stop[i] = stop ? stop[i] : (at.step[i] < 0 ? INT64_MIN : INT64_MAX);
    }
    return rec_finish(&r, IR_OP_SLICE, &at, NULL);
}

kiln_tensor
kiln_concat(int n, const kiln_tensor *xs, int axis)
{
    rec r;
    ir_attrs at = {0};
    if (n < 1 || n > (1 << 16) || !xs) {
        ir_error(KILN_ERR_INVALID_ARG, "kiln_concat: invalid argument: %d tensors", n);
        return (kiln_tensor){0, 0, 0};
    }
    if (!rec_begin(&r, "kiln_concat", n, xs))
        return (kiln_tensor){0, 0, 0};
    int rank = rec_type(&r, 0)->shape.rank;
    at.axis = axis < 0 ? axis + rank : axis;
    return rec_finish(&r, IR_OP_CONCAT, &at, NULL);
}

kiln_tensor
kiln_pad(kiln_tensor x, const int64_t *low, const int64_t *high, double value)
{
    rec r;
    ir_attrs at = {0};
    if (!rec_begin(&r, "kiln_pad", 1, &x))
        return (kiln_tensor){0, 0, 0};
    const ir_type *t = rec_type(&r, 0);
    for (int i = 0; i < t->shape.rank; i++) {
        at.low[i] = low ? low[i] : 0;
        at.high[i] = high ? high[i] : 0;
    }
    at.value = ir_scalar_from_f64(t->dtype, value);
    return rec_finish(&r, IR_OP_PAD, &at, NULL);
}

kiln_tensor
kiln_gather(kiln_tensor x, kiln_tensor indices, int axis)
{
    rec r;
    ir_attrs at = {0};
    kiln_tensor xs[2] = {x, indices};
    if (!rec_begin(&r, "kiln_gather", 2, xs))
        return (kiln_tensor){0, 0, 0};
    int rank = rec_type(&r, 0)->shape.rank;
    at.axis = axis < 0 ? axis + rank : axis;
    return rec_finish(&r, IR_OP_GATHER, &at, NULL);
}

/* ---- accessors -------------------------------------------------------------------------- */

static bool
tensor_type(const char *api, kiln_tensor t, ir_type *out)
{
    cap_scope *s;
    cap_lock();
    bool ok = cap_tensor_resolve_locked(api, t, 0, &s) == KILN_OK;
    if (ok)
        *out = s->graph->nodes[t.node].type;
    cap_unlock();
    return ok;
}

kiln_dtype
kiln_tensor_dtype(kiln_tensor t)
{
    ir_type ty;
    return tensor_type("kiln_tensor_dtype", t, &ty) ? ty.dtype : (kiln_dtype)-1;
}

int
kiln_tensor_rank(kiln_tensor t)
{
    ir_type ty;
    return tensor_type("kiln_tensor_rank", t, &ty) ? ty.shape.rank : -1;
}

int64_t
kiln_tensor_dim(kiln_tensor t, int axis)
{
    ir_type ty;
    if (!tensor_type("kiln_tensor_dim", t, &ty))
        return -1;
    int a = axis < 0 ? axis + ty.shape.rank : axis;
    if (a < 0 || a >= ty.shape.rank) {
        ir_error(KILN_ERR_SHAPE, "kiln_tensor_dim: bad axis: %d of a rank-%d tensor", axis,
                 ty.shape.rank);
        return -1;
    }
    return ty.shape.dims[a];
}
