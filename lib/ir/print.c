/* print.c — the text format's printer (docs/format.md) and DOT output.
 *
 * The printer is the canonical writer of the format: every attribute of an op is printed,
 * in ir_attr_names order, every statement carries its result type, and floats are written
 * as the shortest decimal that reads back to the same bits, so that
 * print(parse(print(g))) == print(g) byte for byte.  Output is deterministic: it depends
 * only on the graph, never on addresses or the locale's idea of anything but the decimal
 * point (kiln assumes the "C" numeric locale, as strtod does). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kiln's b64 constant data is the raw little-endian bytes: a big-endian host needs swaps"
#endif

/* Constants with more elements than this print as base64 of their bytes. */
#define LIST_MAX 64

/* The bit patterns printed as plain `nan`: what 0.0/0.0 gives on most hosts, positive. */
#define F32_QNAN UINT32_C(0x7fc00000)
#define F64_QNAN UINT64_C(0x7ff8000000000000)

int
ir_print_scalar(char *buf, size_t n, kiln_dtype t, const void *elem)
{
    char tmp[64];
    switch (t) {
    case KILN_DTYPE_F32: {
        float v;
        uint32_t bits;
        memcpy(&v, elem, 4);
        memcpy(&bits, elem, 4);
        if (isnan(v)) {
            if (bits == F32_QNAN)
                snprintf(tmp, sizeof tmp, "%s", "nan");
            else
                snprintf(tmp, sizeof tmp, "nan:0x%08" PRIx32, bits);
        } else if (isinf(v)) {
            snprintf(tmp, sizeof tmp, "%s", v > 0 ? "inf" : "-inf");
        } else {
            /* 9 significant digits always round-trip an f32; stop at the first that does.
             * strtof, not strtod: reading through f64 could round twice. */
            for (int p = 1; p <= 9; p++) {
                snprintf(tmp, sizeof tmp, "%.*g", p, (double)v);
                float back = strtof(tmp, NULL);
                if (memcmp(&back, &v, 4) == 0)
                    break;
            }
        }
        break;
    }
    case KILN_DTYPE_F64: {
        double v;
        uint64_t bits;
        memcpy(&v, elem, 8);
        memcpy(&bits, elem, 8);
        if (isnan(v)) {
            if (bits == F64_QNAN)
                snprintf(tmp, sizeof tmp, "%s", "nan");
            else
                snprintf(tmp, sizeof tmp, "nan:0x%016" PRIx64, bits);
        } else if (isinf(v)) {
            snprintf(tmp, sizeof tmp, "%s", v > 0 ? "inf" : "-inf");
        } else {
            for (int p = 1; p <= 17; p++) {
                snprintf(tmp, sizeof tmp, "%.*g", p, v);
                double back = strtod(tmp, NULL);
                if (memcmp(&back, &v, 8) == 0)
                    break;
            }
        }
        break;
    }
    case KILN_DTYPE_I32: {
        int32_t v;
        memcpy(&v, elem, 4);
        snprintf(tmp, sizeof tmp, "%" PRId32, v);
        break;
    }
    case KILN_DTYPE_I64: {
        int64_t v;
        memcpy(&v, elem, 8);
        snprintf(tmp, sizeof tmp, "%" PRId64, v);
        break;
    }
    case KILN_DTYPE_BOOL:
        snprintf(tmp, sizeof tmp, "%s", *(const uint8_t *)elem ? "true" : "false");
        break;
    default:
        snprintf(tmp, sizeof tmp, "%s", "?");
        break;
    }
    return snprintf(buf, n, "%s", tmp);
}

/* ---- output with one sticky error --------------------------------------------------- */

typedef struct printer {
    FILE *f;
    const char *api;
    kiln_status st; /* first failure */
} printer;

static void
out(printer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
out(printer *p, const char *fmt, ...)
{
    if (p->st)
        return;
    va_list ap;
    va_start(ap, fmt);
    int r = vfprintf(p->f, fmt, ap);
    va_end(ap);
    if (r < 0)
        p->st = ir_error(KILN_ERR_IO, "%s: i/o error: %s", p->api, strerror(errno));
}

static void
out_bytes(printer *p, const void *b, size_t n)
{
    if (p->st || n == 0)
        return;
    if (fwrite(b, 1, n, p->f) != n)
        p->st = ir_error(KILN_ERR_IO, "%s: i/o error: %s", p->api, strerror(errno));
}

/* Flush too: a full disk shows up when the buffer is written, which may be only now. */
static kiln_status
finish(printer *p)
{
    if (!p->st && fflush(p->f) != 0)
        p->st = ir_error(KILN_ERR_IO, "%s: i/o error: %s", p->api, strerror(errno));
    if (!p->st && ferror(p->f))
        p->st = ir_error(KILN_ERR_IO, "%s: i/o error: the stream reports an error", p->api);
    return p->st;
}

/* ---- names ---------------------------------------------------------------------------- */

static bool
is_ident(const char *s)
{
    if (!s || !(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z')))
        return false;
    for (s++; *s; s++)
        if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
              (*s >= '0' && *s <= '9')))
            return false;
    return true;
}

/* A name as the parser reads it: a bare identifier when it is one, else a quoted string
 * with every byte outside printable ASCII (and " and \) escaped, so the text stays ASCII
 * whatever the API was given. */
static void
out_name(printer *p, const char *s)
{
    if (is_ident(s)) {
        out(p, "%s", s);
        return;
    }
    out(p, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            out(p, "\\%c", *c);
        else if (*c < 0x20 || *c > 0x7e)
            out(p, "\\x%02x", *c);
        else
            out(p, "%c", *c);
    }
    out(p, "\"");
}

static bool
has_name(const ir_node *nd)
{
    return nd->name && nd->name[0];
}

/* The N of an unnamed node's label %N: the id the node gets when the text is parsed
 * (inputs first, then the statements in order).  That is its node id whenever the inputs
 * come first, as in every parsed graph; a captured graph may declare an input after other
 * nodes, and numbering by parse order keeps print(parse(print(g))) == print(g) for it too.
 * g->inputs is ascending (an input is appended as a node and to the list at once), so the
 * inputs before `id` are found by bisection. */
static int32_t
text_id(const kiln_graph *g, int32_t id)
{
    int32_t lo = 0, hi = g->ninputs;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (g->inputs[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return g->ninputs + (id - lo);
}

/* The name a value goes by in the text: its own, or a %N label when it has none. */
static void
out_value(printer *p, const kiln_graph *g, int32_t id)
{
    if (has_name(&g->nodes[id]))
        out_name(p, g->nodes[id].name);
    else
        out(p, "%%%" PRId32, text_id(g, id));
}

static void
out_type(printer *p, const ir_type *t)
{
    out(p, "%s[", kiln_dtype_name(t->dtype));
    for (int i = 0; i < t->shape.rank; i++)
        out(p, i ? ",%" PRId64 : "%" PRId64, t->shape.dims[i]);
    out(p, "]");
}

static void
out_i64s(printer *p, const int64_t *v, int n)
{
    out(p, "[");
    for (int i = 0; i < n; i++)
        out(p, i ? ",%" PRId64 : "%" PRId64, v[i]);
    out(p, "]");
}

static void
out_scalar(printer *p, kiln_dtype t, const void *elem)
{
    char buf[64];
    ir_print_scalar(buf, sizeof buf, t, elem);
    out(p, "%s", buf);
}

/* ---- base64 (RFC 4648, standard alphabet, with padding) -------------------------------- */

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void
out_b64(printer *p, const unsigned char *b, size_t n)
{
    char buf[4 * 256];
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)b[i + 1] << 8;
        if (i + 2 < n)
            v |= b[i + 2];
        buf[k++] = b64_alphabet[(v >> 18) & 63];
        buf[k++] = b64_alphabet[(v >> 12) & 63];
        buf[k++] = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
        buf[k++] = i + 2 < n ? b64_alphabet[v & 63] : '=';
        if (k == sizeof buf) {
            out_bytes(p, buf, k);
            k = 0;
        }
    }
    out_bytes(p, buf, k);
}

/* ---- the graph -------------------------------------------------------------------------- */

static void
out_attrs(printer *p, const ir_node *nd, bool first)
{
    unsigned m = ir_ops[nd->op].attrs;
    const ir_attrs *a = nd->at;
    kiln_dtype t = nd->type.dtype;
    int rank = nd->type.shape.rank;
    int xrank = rank; /* the operand's rank, for per-axis lists */
    for (int bit = 0; bit < IR_ATTR_COUNT; bit++) {
        if (!(m & (1u << bit)))
            continue;
        out(p, first ? "%s=" : ", %s=", ir_attr_names[bit]);
        first = false;
        switch (1u << bit) {
        case IR_A_DATA: {
            size_t count = ir_shape_count(&nd->type.shape);
            if (count > LIST_MAX) {
                out(p, "b64\"");
                out_b64(p, a->data, ir_type_bytes(&nd->type));
                out(p, "\"");
            } else {
                size_t size = kiln_dtype_size(t);
                out(p, "[");
                for (size_t i = 0; i < count; i++) {
                    if (i)
                        out(p, ", ");
                    out_scalar(p, t, (const char *)a->data + i * size);
                }
                out(p, "]");
            }
            break;
        }
        case IR_A_VALUE:
            out_scalar(p, t, a->value.bytes);
            break;
        case IR_A_START:
            if (nd->op == IR_OP_ARANGE)
                out_scalar(p, t, a->start.bytes);
            else
                out_i64s(p, a->begin, xrank);
            break;
        case IR_A_STOP:
            out_i64s(p, a->stop, xrank);
            break;
        case IR_A_STEP:
            out_i64s(p, a->step, xrank);
            break;
        case IR_A_DELTA:
            out_scalar(p, t, a->delta.bytes);
            break;
        case IR_A_LOW:
            out_i64s(p, a->low, xrank);
            break;
        case IR_A_HIGH:
            out_i64s(p, a->high, xrank);
            break;
        case IR_A_TO:
            out(p, "%s", kiln_dtype_name(a->to));
            break;
        case IR_A_SHAPE:
            out_i64s(p, a->shape.dims, a->shape.rank);
            break;
        case IR_A_PERM:
            out(p, "[");
            for (int i = 0; i < xrank; i++)
                out(p, i ? ",%d" : "%d", a->perm[i]);
            out(p, "]");
            break;
        case IR_A_AXIS:
            out(p, "%d", a->axis);
            break;
        case IR_A_AXES: {
            out(p, "[");
            bool any = false;
            for (int i = 0; i < 32; i++)
                if (a->axes & (1u << i)) {
                    out(p, any ? ",%d" : "%d", i);
                    any = true;
                }
            out(p, "]");
            break;
        }
        case IR_A_KEEPDIM:
            out(p, "%s", a->keepdim ? "true" : "false");
            break;
        }
    }
}

kiln_status
ir_graph_print(const kiln_graph *g, FILE *f)
{
    printer pr = {f, "kiln_graph_print", KILN_OK}, *p = &pr;
    if (!f)
        return ir_error(KILN_ERR_INVALID_ARG, "kiln_graph_print: invalid argument: stream is NULL");
    out(p, "graph ");
    out_name(p, g->name);
    out(p, "(");
    for (int32_t i = 0; i < g->ninputs; i++) {
        const ir_node *nd = &g->nodes[g->inputs[i]];
        out(p, i ? ", " : "");
        out_name(p, nd->name);
        out(p, ": ");
        out_type(p, &nd->type);
    }
    out(p, ") -> (");
    for (int32_t i = 0; i < g->noutputs; i++) {
        const ir_output *o = &g->outputs[i];
        const ir_node *nd = &g->nodes[o->node];
        out(p, i ? ", " : "");
        out_name(p, o->name);
        out(p, ": ");
        out_type(p, &nd->type);
        /* The short form only when the output's name is exactly its value's name. */
        if (!(has_name(nd) && is_ident(o->name) && strcmp(o->name, nd->name) == 0)) {
            out(p, " = ");
            out_value(p, g, o->node);
        }
    }
    out(p, ") {\n");
    for (int32_t id = 0; id < g->nnodes && !p->st; id++) {
        const ir_node *nd = &g->nodes[id];
        if (nd->op == IR_OP_INPUT)
            continue;
        out(p, "  ");
        out_value(p, g, id);
        out(p, " = %s(", ir_ops[nd->op].name);
        for (int k = 0; k < nd->nin; k++) {
            out(p, k ? ", " : "");
            out_value(p, g, nd->in[k]);
        }
        /* Per-axis lists have the operand's rank (slice and pad keep it; permute too). */
        out_attrs(p, nd, nd->nin == 0);
        out(p, ") : ");
        out_type(p, &nd->type);
        out(p, "\n");
    }
    out(p, "}\n");
    return finish(p);
}

/* ---- DOT ------------------------------------------------------------------------------- */

/* Whether s is valid UTF-8 (names from the API need not be). */
static bool
is_utf8(const unsigned char *s)
{
    while (*s) {
        int k = *s < 0x80 ? 0 : (*s & 0xe0) == 0xc0 ? 1 : (*s & 0xf0) == 0xe0 ? 2
                : (*s & 0xf8) == 0xf0 ? 3 : -1;
        if (k < 0)
            return false;
        for (int j = 1; j <= k; j++)
            if ((s[j] & 0xc0) != 0x80)
                return false;
        s += k + 1;
    }
    return true;
}

/* Text inside a DOT double-quoted string: quotes and backslashes escaped, control bytes
 * (and every non-ASCII byte of a name that is not UTF-8) written as \xNN, so a name can
 * never break the file. */
static void
out_dot_text(printer *p, const char *s)
{
    bool utf8 = is_utf8((const unsigned char *)s);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            out(p, "\\%c", *c);
        else if (*c < 0x20 || *c == 0x7f || (*c >= 0x80 && !utf8))
            out(p, "\\\\x%02x", *c);
        else
            out(p, "%c", *c);
    }
}

kiln_status
ir_graph_print_dot(const kiln_graph *g, FILE *f)
{
    printer pr = {f, "kiln_graph_print_dot", KILN_OK}, *p = &pr;
    if (!f)
        return ir_error(KILN_ERR_INVALID_ARG,
                        "kiln_graph_print_dot: invalid argument: stream is NULL");
    out(p, "digraph \"");
    out_dot_text(p, g->name);
    out(p, "\" {\n");
    out(p, "  node [fontname=\"monospace\", shape=box, style=rounded];\n");
    for (int32_t id = 0; id < g->nnodes && !p->st; id++) {
        const ir_node *nd = &g->nodes[id];
        char tbuf[IR_TYPE_STR_MAX];
        out(p, "  n%" PRId32 " [label=\"", id);
        if (has_name(nd))
            out_dot_text(p, nd->name);
        else
            out(p, "%%%" PRId32, text_id(g, id)); /* as in the text */
        out(p, "\\n%s\\n%s", ir_ops[nd->op].name, ir_type_str(&nd->type, tbuf, sizeof tbuf));
        /* Outputs carry their output names: one value may be several outputs. */
        bool is_out = false;
        for (int32_t i = 0; i < g->noutputs; i++)
            if (g->outputs[i].node == id) {
                out(p, is_out ? ", " : "\\n-> ");
                out_dot_text(p, g->outputs[i].name);
                is_out = true;
            }
        out(p, "\"");
        if (nd->op == IR_OP_INPUT)
            out(p, ", shape=invhouse, style=filled, fillcolor=\"#cfe2ff\"");
        else if (ir_ops[nd->op].kind == IR_KIND_SOURCE)
            out(p, ", style=\"rounded,filled\", fillcolor=\"#eeeeee\"");
        if (is_out)
            out(p, ", peripheries=2, color=\"#b00000\"");
        out(p, "];\n");
    }
    for (int32_t id = 0; id < g->nnodes && !p->st; id++) {
        const ir_node *nd = &g->nodes[id];
        for (int k = 0; k < nd->nin; k++) {
            out(p, "  n%" PRId32 " -> n%" PRId32, nd->in[k], id);
            /* Operand order matters for sub, div, where...: label it when there are two+. */
            if (nd->nin > 1)
                out(p, " [label=\"%d\"]", k);
            out(p, ";\n");
        }
    }
    out(p, "}\n");
    return finish(p);
}
