/* fuzz_graphs.c — libFuzzer target: a differential fuzzer over VALID graphs (issue 26,
 * docs/fuzzing.md).  fuzz_parse_run feeds the parser bytes, and most of what it compiles is
 * tiny; the graph bugs of issue 26 (a rank-8 full reduction written out of bounds, a
 * fusion plan with a cycle) were found by random valid graphs instead.  Here the input
 * drives the test suite's generator of valid graphs (tests/support/randgraph.c: every op
 * of the table, every dtype, ranks 0-8 with empty and size-1 dims, broadcasting, views,
 * concat/pad/gather, reductions with producers and consumers, softmax-like chains,
 * matmuls with the elementwise ops after them), and every graph is run three ways.
 *
 * Input: a graph in kiln's text format when it starts with "graph " (the seed corpus
 * holds the graphs that way); otherwise generator parameters:
 *   bytes 0-7   the generator's seed (little-endian; missing bytes are 0)
 *   byte 8      max rank of the inputs: 1-8 (reductions make ranks down to 0)
 *   byte 9      dims: bit 7 large (max_dim 2-40, 4096 elements), else max_dim 1-8
 *   byte 10     bits 0-3: percent chance of a zero dim (0-15); bits 4-7: in steps of 6
 *               percent (0-90), the chance that a reduction reduces every axis
 *   byte 11     percent chance a reduction gets a consumer (then maybe a second
 *               reduction: softmax, layernorm): 0-100
 *   byte 12     bit 0 tame values (no NaN, inf, -0.0, subnormals, extremes); bits 1-7: the
 *               op that must appear (0: none; else op (b >> 1) - 1 modulo the op count)
 *   byte 13     kinds: bits 1 << IR_KIND_* (the others ignored); none: every kind
 *   byte 14     computing nodes: 1 + b % 24
 *   byte 15     percent chance that a reduction's consumer reads another value of its
 *               operand's type (a concat, say), and half the time a second consumer
 *               reads both: 0-100
 *   byte 16     bit 0: compile the graph's elementwise kernels compact (KILN_CODE_COMPACT,
 *               fused and eager alike; reductions and matmuls are always full); missing
 *               or clear: the default, full code at these sizes.  KILN_FUZZ_CODE=full or
 *               =compact overrides it for every graph (docs/fuzzing.md, "Throughput")
 * so libFuzzer's mutations of a short input move through graph shapes and op mixes.
 * Byte 16 puts the compact tier under the oracle too, and pays for itself: a kernel that
 * LLVM's fast code generator compiles costs about half the CPU time of a full one, and
 * LLVM is ~70% of this target's time (docs/fuzzing.md, "Throughput").
 *
 * Findings (abort):
 *   - compiling a graph the verifier accepted fails, fused or eager, with any code
 *     (KILN_ERR_INTERNAL, "fusion plan has a cycle", ...), or a run fails;
 *   - an output element of the fused or the eager program beyond the bound `kiln check`
 *     propagates through the graph from the interpreter's values (lib/check/errbound.c;
 *     exact where no inexact op feeds it; NaN matches NaN);
 *   - a crash, an internal-error abort, a sanitizer report.
 * Programs are compiled with the in-memory caches (a kernel seen before is not compiled
 * again, which makes the run many times faster); the disk cache is off.  At exit it prints
 * how many graphs it checked, how many of them were new to the program cache (libFuzzer
 * repeats inputs: a mutation of bytes past 16, or to an equivalent option, gives the same
 * graph), and the kernels LLVM compiled. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errbound.h"
#include "ir.h"
#include "randgraph.h"

#define MAX_NODES 256

/* What the process checked, for the line at exit. */
static uint64_t n_graphs, n_new, n_compact;
/* KILN_FUZZ_CODE: 'f' (full), 'c' (compact), or 0: byte 16 chooses */
static char code_env;

static void
fail(const char *what, const kiln_graph *g, const char *mode)
{
    char *text = g ? kiln_graph_to_string(g) : NULL;
    fprintf(stderr, "fuzz_graphs: %s%s%s\n--- graph ---\n%s--- end ---\n", mode ? mode : "",
            mode ? ": " : "", what, text ? text : "(none)\n");
    free(text);
    abort();
}

static uint64_t
le64(const uint8_t *d, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < 8 && i < n; i++)
        v |= (uint64_t)d[i] << (8 * i);
    return v;
}

/* The generator's options from bytes 8.. of the input (see the header). */
static void
options(const uint8_t *d, size_t n, ts_randgraph_opts *o)
{
    ts_randgraph_defaults(o);
    o->plain_names = true;
    uint8_t b[8] = {4, 5, 4, 30, 0, 0, 11, 0};
    for (size_t i = 0; i < 8 && 8 + i < n; i++)
        b[i] = d[8 + i];
    o->max_rank = 1 + b[0] % 8;
    if (b[1] & 0x80) {
        o->max_dim = 2 + (b[1] & 0x7f) % 39;
        o->max_elems = 4096;
    } else {
        o->max_dim = 1 + b[1] % 8;
    }
    o->zero_dim_pct = b[2] & 15;
    o->full_reduce_pct = (b[2] >> 4) * 6;
    o->reduce_consumer_pct = b[3] % 101;
    o->tame_values = b[4] & 1;
    o->require_op = (b[4] >> 1) ? (int)((b[4] >> 1) - 1) % IR_OP_COUNT : -1;
    if (o->require_op == IR_OP_INPUT)
        o->require_op = -1;
    o->kinds = (unsigned)b[5] & ((1u << (IR_KIND_MATMUL + 1)) - 1); /* 0: every kind */
    o->max_nodes = 1 + b[6] % 24;
    o->reduce_other_pct = b[7] % 101;
}

/* Run g fused and eager on inputs from `seed` and hold both to the interpreter. */
static void
check(const kiln_graph *g, uint64_t seed, bool tame, bool compact)
{
    int ni = g->ninputs, no = g->noutputs;
    void **in = calloc((size_t)ni + 1, sizeof *in), **out = calloc((size_t)no + 1, sizeof *out);
    eb_output *eb = calloc((size_t)no + 1, sizeof *eb);
    if (!in || !out || !eb)
        fail("out of memory", g, NULL);
    ts_rng r;
    ts_rng_seed(&r, seed ^ 0x66757a7a67726170ull);
    for (int i = 0; i < ni; i++) {
        const ir_type *t = &g->nodes[g->inputs[i]].type;
        if (!(in[i] = malloc(ir_type_bytes(t) + 1)))
            fail("out of memory", g, NULL);
        ts_random_elements(&r, t->dtype, in[i], (size_t)ir_shape_count(&t->shape), tame);
    }
    for (int k = 0; k < no; k++)
        if (!(out[k] = malloc(ir_type_bytes(&g->nodes[g->outputs[k].node].type) + 1)))
            fail("out of memory", g, NULL);
    if (eb_reference(g, (const void *const *)in, eb) != KILN_OK)
        fail(kiln_errmsg(), g, "interp");
    for (int m = 0; m < 2; m++) {
        const char *mode = m ? (compact ? "eager, compact code" : "eager")
                             : (compact ? "fused, compact code" : "fused");
        kiln_options o = KILN_OPTIONS_INIT;
        o.mode = m ? KILN_MODE_EAGER : KILN_MODE_FUSED;
        o.code = compact ? KILN_CODE_COMPACT : KILN_CODE_AUTO;
        kiln_program *p = NULL;
        kiln_stats before = KILN_STATS_INIT, after = KILN_STATS_INIT;
        kiln_jit_stats(&before);
        if (kiln_program_compile(g, &o, &p) != KILN_OK)
            fail(kiln_errmsg(), g, mode); /* the verifier accepted it */
        kiln_jit_stats(&after);
        if (m == 0 && after.plan_misses > before.plan_misses)
            n_new++;
        for (int k = 0; k < no; k++) /* poison: an element never written shows */
            memset(out[k], 0xa5, ir_type_bytes(&g->nodes[g->outputs[k].node].type));
        if (kiln_program_run(p, (const void *const *)in, out) != KILN_OK)
            fail(kiln_errmsg(), g, mode);
        for (int k = 0; k < no; k++) {
            const ir_type *t = &g->nodes[g->outputs[k].node].type;
            for (size_t i = 0; i < (size_t)ir_shape_count(&t->shape); i++) {
                double ratio, bound = eb[k].bound ? eb[k].bound[i] : 0;
                if (!eb_within(t->dtype, out[k], eb[k].ref, i, bound, &ratio)) {
                    char msg[256];
                    snprintf(msg, sizeof msg, "output %s[%zu]: %.17g, interpreter %.17g, bound %g",
                             g->outputs[k].name, i, ir_load_f64(t->dtype, out[k], i),
                             ir_load_f64(t->dtype, eb[k].ref, i), bound);
                    fail(msg, g, mode);
                }
            }
        }
        kiln_program_free(p);
    }
    eb_free(g, eb);
    free(eb);
    n_graphs++;
    n_compact += compact;
    for (int i = 0; i < ni; i++)
        free(in[i]);
    for (int k = 0; k < no; k++)
        free(out[k]);
    free(in);
    free(out);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
report(void)
{
    kiln_stats s = KILN_STATS_INIT;
    kiln_jit_stats(&s);
    fprintf(stderr,
            "fuzz_graphs: %llu graphs checked, %llu new to the program cache, %llu with "
            "compact code; %llu kernels compiled, %.1f s in LLVM\n",
            (unsigned long long)n_graphs, (unsigned long long)n_new,
            (unsigned long long)n_compact, (unsigned long long)s.kernel_compiles,
            s.compile_ms / 1000);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("KILN_CACHE_DIR", "off", 1); /* the in-memory caches only */
    const char *c = getenv("KILN_FUZZ_CODE");
    if (c && (!strcmp(c, "full") || !strcmp(c, "compact")))
        code_env = c[0];
    else if (c && *c && strcmp(c, "mixed") != 0) {
        fprintf(stderr, "fuzz_graphs: KILN_FUZZ_CODE is full, compact or mixed, not '%s'\n", c);
        exit(2);
    }
    atexit(report); /* libFuzzer ends a bounded run with exit() */
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= 6 && memcmp(data, "graph ", 6) == 0) {
        /* a graph of the corpus, as text; the oracle needs it valid */
        kiln_graph *g = NULL;
        if (size > 65536 || kiln_graph_parse((const char *)data, size, &g) != KILN_OK)
            return 0;
        if (g->nnodes <= MAX_NODES)
            check(g, le64(data, size), false, code_env == 'c');
        kiln_graph_free(g);
        return 0;
    }
    uint64_t seed = le64(data, size);
    ts_randgraph_opts o;
    options(data, size, &o);
    kiln_graph *g = ts_random_graph(seed, &o);
    if (!g)
        fail(kiln_errmsg(), NULL, "the generator failed (a bug in it or in the type rules)");
    bool compact = code_env ? code_env == 'c' : size > 16 && (data[16] & 1);
    check(g, seed, o.tame_values, compact);
    kiln_graph_free(g);
    return 0;
}
