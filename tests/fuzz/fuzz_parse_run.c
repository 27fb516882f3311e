/* fuzz_parse_run.c — libFuzzer target: arbitrary text through kiln_graph_parse, and every
 * graph that parses through the printer, the compiler and the run (docs/fuzzing.md).
 *
 * A crash, a sanitizer report or an abort is a finding.  Besides those, the target aborts
 * when a property kiln promises does not hold:
 *   - a parse error has a code and a message;
 *   - a parsed graph prints to text that parses back to an equal graph;
 *   - compiling (fused and eager) never fails with KILN_ERR_INTERNAL (a module that does
 *     not verify, an LLVM error on valid input);
 *   - a compiled program runs (KILN_OK), and so does the interpreter;
 *   - with KILN_FUZZ_ORACLE=1 in the environment, every output element of both programs
 *     is within `kiln check`'s bound of the interpreter's (lib/check/errbound.c) — slower,
 *     for long runs.
 * Graphs whose values take more than 4 MiB, or with more than 256 nodes, are only parsed
 * and printed: the target looks for wrong behaviour, not for slow compiles of big graphs. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errbound.h"
#include "ir.h"

#define MAX_BYTES ((size_t)4 << 20)
#define MAX_NODES 256

static void
fail(const char *what, const char *text, size_t len)
{
    fprintf(stderr, "fuzz_parse_run: %s\n--- input ---\n%.*s\n--- end ---\n", what, (int)len,
            text);
    abort();
}

/* Special values, cycled, and small integers: deterministic inputs. */
static void
fill(kiln_dtype t, void *p, size_t n, int salt)
{
    static const double vals[] = {0.5, -1.5, 0.0, -0.0, 2.0, 1e-3, -7.25, 100.0, INFINITY,
                                  NAN, -INFINITY, 1e-40, 3.0, -0.75, 1e30, 0.1};
    for (size_t i = 0; i < n; i++) {
        size_t k = (i * 7 + (size_t)salt * 3) % (sizeof vals / sizeof vals[0]);
        if (ir_dtype_is_float(t))
            ir_store_f64(t, p, i, vals[k]);
        else if (t == KILN_DTYPE_BOOL)
            ((unsigned char *)p)[i] = (unsigned char)(k & 1);
        else
            ir_store_i64(t, p, i, (int64_t)k - 5);
    }
}

static size_t
value_bytes(const kiln_graph *g)
{
    size_t total = 0;
    for (int32_t i = 0; i < g->nnodes; i++) {
        size_t b = ir_type_bytes(&g->nodes[i].type);
        if (b > MAX_BYTES || total + b > MAX_BYTES)
            return SIZE_MAX;
        total += b;
    }
    return total;
}

static void
run_all(const kiln_graph *g, const char *text, size_t len)
{
    int ni = g->ninputs, no = g->noutputs;
    void **in = calloc((size_t)ni + 1, sizeof *in), **out = calloc((size_t)no + 1, sizeof *out),
         **ref = calloc((size_t)no + 1, sizeof *ref);
    kiln_program *p[2] = {NULL, NULL};
    if (!in || !out || !ref)
        fail("out of memory", text, len);
    for (int i = 0; i < ni; i++) {
        const ir_type *t = &g->nodes[g->inputs[i]].type;
        if (!(in[i] = malloc(ir_type_bytes(t) + 1)))
            fail("out of memory", text, len);
        fill(t->dtype, in[i], ir_shape_count(&t->shape), i);
    }
    for (int k = 0; k < no; k++) {
        size_t b = ir_type_bytes(&g->nodes[g->outputs[k].node].type) + 1;
        if (!(out[k] = malloc(b)) || !(ref[k] = malloc(b)))
            fail("out of memory", text, len);
    }
    if (kiln_graph_interpret(g, (const void *const *)in, ref) != KILN_OK)
        fail(kiln_errmsg(), text, len);
    const char *oracle = getenv("KILN_FUZZ_ORACLE");
    eb_output *eb = NULL;
    if (oracle && *oracle == '1') {
        if (!(eb = calloc((size_t)no + 1, sizeof *eb)))
            fail("out of memory", text, len);
        if (eb_reference(g, (const void *const *)in, eb) != KILN_OK)
            fail(kiln_errmsg(), text, len);
    }
    for (int m = 0; m < 2; m++) {
        kiln_options o = KILN_OPTIONS_INIT;
        o.mode = m ? KILN_MODE_EAGER : KILN_MODE_FUSED;
        o.flags = KILN_NO_CACHE;
        kiln_status st = kiln_program_compile(g, &o, &p[m]);
        if (st == KILN_ERR_INTERNAL)
            fail(kiln_errmsg(), text, len);
        if (st != KILN_OK)
            continue;
        if (kiln_program_run(p[m], (const void *const *)in, out) != KILN_OK)
            fail(kiln_errmsg(), text, len);
        for (int k = 0; eb && k < no; k++) {
            const ir_type *t = &g->nodes[g->outputs[k].node].type;
            for (size_t i = 0; i < ir_shape_count(&t->shape); i++) {
                double ratio;
                if (!eb_within(t->dtype, out[k], eb[k].ref, i, eb[k].bound ? eb[k].bound[i] : 0,
                               &ratio)) {
                    char msg[256];
                    snprintf(msg, sizeof msg, "%s: output %s[%zu]: %g, reference %g, bound %g",
                             m ? "eager" : "fused", g->outputs[k].name, i,
                             ir_load_f64(t->dtype, out[k], i), ir_load_f64(t->dtype, eb[k].ref, i),
                             eb[k].bound ? eb[k].bound[i] : 0.0);
                    fail(msg, text, len);
                }
            }
        }
    }
    kiln_program_free(p[0]);
    kiln_program_free(p[1]);
    if (eb)
        eb_free(g, eb);
    free(eb);
    for (int i = 0; i < ni; i++)
        free(in[i]);
    for (int k = 0; k < no; k++) {
        free(out[k]);
        free(ref[k]);
    }
    free(in);
    free(out);
    free(ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    if (size > 65536)
        return 0;
    kiln_graph *g = NULL;
    if (kiln_graph_parse(text, size, &g) != KILN_OK) {
        if (kiln_errcode() == KILN_OK || !kiln_errmsg()[0])
            fail("a parse failure without a code or message", text, size);
        if (kiln_errcode() == KILN_ERR_INTERNAL)
            fail(kiln_errmsg(), text, size);
        return 0;
    }
    char *printed = kiln_graph_to_string(g);
    if (!printed)
        fail(kiln_errmsg(), text, size);
    kiln_graph *again = NULL;
    if (kiln_graph_parse(printed, strlen(printed), &again) != KILN_OK ||
        !kiln_graph_equal(g, again)) {
        fprintf(stderr, "printed:\n%s\n%s\n", printed, kiln_errmsg());
        fail("the printed graph does not parse back to an equal graph", text, size);
    }
    kiln_graph_free(again);
    free(printed);
    if (g->nnodes <= MAX_NODES && value_bytes(g) != SIZE_MAX)
        run_all(g, text, size);
    kiln_graph_free(g);
    return 0;
}
