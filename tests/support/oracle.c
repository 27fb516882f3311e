/* oracle.c — compiled against the reference, under stated tolerances (oracle.h). */
#include "oracle.h"

#include <check.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "errbound.h"
#include "refmath.h"
#include "ir.h"

extern char **environ;

/* ---- buffers ---------------------------------------------------------------------------- */

void
ts_bufs_for_inputs(const kiln_graph *g, ts_bufs *b)
{
    b->n = kiln_graph_num_inputs(g);
    ck_assert_int_le(b->n, TS_MAXIO);
    for (int i = 0; i < b->n; i++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        ck_assert_int_eq(kiln_graph_input(g, i, &vi), KILN_OK);
        b->buf[i] = vi.bytes ? malloc(vi.bytes) : NULL;
        ck_assert(vi.bytes == 0 || b->buf[i] != NULL);
    }
}

void
ts_bufs_free(ts_bufs *b)
{
    for (int i = 0; i < b->n; i++) {
        free(b->buf[i]);
        b->buf[i] = NULL;
    }
    b->n = 0;
}

/* ---- floats ------------------------------------------------------------------------------ */

double
ts_load_float(kiln_dtype t, const void *p, size_t i)
{
    if (t == KILN_DTYPE_F32) {
        float f;
        memcpy(&f, (const char *)p + 4 * i, 4);
        return f;
    }
    double d;
    memcpy(&d, (const char *)p + 8 * i, 8);
    return d;
}

double
ts_ulp(kiln_dtype t, double x)
{
    /* the oracle's ULP (lib/check/refmath.h), one notion for tests and kiln check */
    return (double)ref_ulp_of(t, x);
}

void
ts_elem_str(kiln_dtype t, const void *p, size_t i, char *buf, size_t n)
{
    switch (t) {
    case KILN_DTYPE_F32: {
        uint32_t u;
        memcpy(&u, (const char *)p + 4 * i, 4);
        snprintf(buf, n, "%.9g (0x%08" PRIx32 ")", ts_load_float(t, p, i), u);
        break;
    }
    case KILN_DTYPE_F64: {
        uint64_t u;
        memcpy(&u, (const char *)p + 8 * i, 8);
        snprintf(buf, n, "%.17g (0x%016" PRIx64 ")", ts_load_float(t, p, i), u);
        break;
    }
    case KILN_DTYPE_I32: {
        int32_t v;
        memcpy(&v, (const char *)p + 4 * i, 4);
        snprintf(buf, n, "%" PRId32, v);
        break;
    }
    case KILN_DTYPE_I64: {
        int64_t v;
        memcpy(&v, (const char *)p + 8 * i, 8);
        snprintf(buf, n, "%" PRId64, v);
        break;
    }
    default: snprintf(buf, n, "%u", ((const uint8_t *)p)[i]); break;
    }
}

/* Does element i match?  *allowed gets the bound used (for the report). */
static bool
elem_ok(kiln_dtype t, const void *got, const void *want, size_t i, const ts_tol *tol,
        double *allowed)
{
    size_t es = kiln_dtype_size(t);
    bool fl = t == KILN_DTYPE_F32 || t == KILN_DTYPE_F64;
    *allowed = 0;
    switch (tol->kind) {
    case TS_TOL_EXACT:
        if (memcmp((const char *)got + es * i, (const char *)want + es * i, es) == 0)
            return true;
        return fl && isnan(ts_load_float(t, got, i)) && isnan(ts_load_float(t, want, i));
    case TS_TOL_BOUND: { /* kiln check's comparison, ints and NaN included */
        double ratio;
        *allowed = tol->bound ? tol->bound[i] : 0;
        if (tol->nonfinite && fl && !isfinite(ts_load_float(t, want, i))) {
            double g = ts_load_float(t, got, i), w = ts_load_float(t, want, i);
            return isnan(w) ? isnan(g) : g == w;
        }
        if (tol->zero_sign && *allowed == 0 && fl && ts_load_float(t, got, i) == 0 &&
            ts_load_float(t, want, i) == 0)
            return memcmp((const char *)got + es * i, (const char *)want + es * i, es) == 0;
        return eb_within(t, got, want, i, *allowed, &ratio);
    }
    case TS_TOL_SKIP:
        return true;
    }
    return false;
}

size_t
ts_compare(FILE *f, const char *what, kiln_dtype t, size_t count, const void *got,
           const void *want, const ts_tol *tol)
{
    static const ts_tol exact = {.kind = TS_TOL_EXACT};
    if (!tol)
        tol = &exact;
    if (tol->kind == TS_TOL_SKIP)
        return 0;
    size_t bad = 0;
    for (size_t e = 0; e < count; e++) {
        double allowed;
        if (elem_ok(t, got, want, e, tol, &allowed))
            continue;
        if (bad++ < 6) {
            char a[64], b[64];
            ts_elem_str(t, got, e, a, sizeof a);
            ts_elem_str(t, want, e, b, sizeof b);
            fprintf(f, "%s (%s) element %zu: got %s, reference %s", what, kiln_dtype_name(t), e,
                    a, b);
            if (tol->kind == TS_TOL_BOUND && (t == KILN_DTYPE_F32 || t == KILN_DTYPE_F64))
                fprintf(f, "; |diff| %.3g, allowed %.3g",
                        fabs(ts_load_float(t, got, e) - ts_load_float(t, want, e)), allowed);
            else if (tol->kind == TS_TOL_BOUND)
                fprintf(f, "; allowed %.3g", allowed);
            fputc('\n', f);
        }
    }
    if (bad)
        fprintf(f, "%s: %zu of %zu elements differ\n", what, bad, count);
    return bad;
}

/* ---- running ------------------------------------------------------------------------------ */

static const char *
mode_name(kiln_mode m)
{
    return m == KILN_MODE_FUSED ? "fused" : m == KILN_MODE_EAGER ? "eager" : "interp";
}

int
ts_count(const char *text, const char *word)
{
    int n = 0;
    for (const char *q = text; (q = strstr(q, word)); q += strlen(word))
        n++;
    return n;
}

char *
ts_plan_text(const kiln_program *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    kiln_status st = kiln_program_dump(p, KILN_VIEW_PLAN, f);
    fclose(f);
    ck_assert_msg(st == KILN_OK, "plan dump: %s", kiln_errmsg());
    return text;
}

int
ts_plan_reference_steps(const char *plan)
{
    int n = 0;
    for (const char *s = plan; s && *s;) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        for (size_t k = 0; k + 10 <= len; k++)
            if (memcmp(s + k, "reference:", 10) == 0) {
                n++;
                break;
            }
        s = nl ? nl + 1 : s + len;
    }
    return n;
}

char *
ts_run_mode(const kiln_graph *g, kiln_mode mode, const ts_bufs *in, ts_bufs *out,
            unsigned char poison)
{
    char *rep = NULL;
    size_t replen = 0;
    FILE *f = open_memstream(&rep, &replen);
    ck_assert_ptr_nonnull(f);
    bool bad = false;
    int nout = kiln_graph_num_outputs(g);
    ck_assert_int_le(nout, TS_MAXIO);
    kiln_value_info info[TS_MAXIO];
    out->n = nout;
    for (int i = 0; i < nout; i++) {
        info[i] = (kiln_value_info)KILN_VALUE_INFO_INIT;
        ck_assert_int_eq(kiln_graph_output(g, i, &info[i]), KILN_OK);
        out->buf[i] = malloc(info[i].bytes + TS_GUARD);
        ck_assert_ptr_nonnull(out->buf[i]);
        memset(out->buf[i], poison, info[i].bytes + TS_GUARD);
    }
    kiln_options opt = KILN_OPTIONS_INIT;
    opt.mode = mode;
    kiln_program *p = NULL;
    if (kiln_program_compile(g, &opt, &p) != KILN_OK) {
        fprintf(f, "%s: compile failed: %s\n", mode_name(mode), kiln_errmsg());
        bad = true;
    } else if (kiln_program_run(p, (const void *const *)in->buf, out->buf) != KILN_OK) {
        fprintf(f, "%s: run failed: %s\n", mode_name(mode), kiln_errmsg());
        bad = true;
    } else {
        for (int i = 0; i < nout; i++) {
            const unsigned char *gd = (const unsigned char *)out->buf[i] + info[i].bytes;
            for (int k = 0; k < TS_GUARD; k++)
                if (gd[k] != poison) {
                    fprintf(f, "%s: output %d '%s' written past its end (guard byte %d)\n",
                            mode_name(mode), i, info[i].name, k);
                    bad = true;
                    break;
                }
        }
    }
    if (bad && p) {
        char *plan = ts_plan_text(p);
        fprintf(f, "---- plan (%s)\n%s", mode_name(mode), plan);
        free(plan);
    }
    kiln_program_free(p);
    fclose(f);
    if (!bad) {
        free(rep);
        return NULL;
    }
    ts_bufs_free(out);
    return rep;
}

char *
ts_check_modes(const kiln_graph *g, const ts_bufs *in, const ts_tol *tols, int nmodes,
               const kiln_mode *modes)
{
    char *rep = NULL;
    size_t replen = 0;
    FILE *f = open_memstream(&rep, &replen);
    ck_assert_ptr_nonnull(f);
    bool bad = false;
    if (getenv("KILN_TEST_TRACE")) { /* which graph a crash happened in */
        char *text = kiln_graph_to_string(g);
        fprintf(stderr, "---- checking\n%s", text ? text : "(cannot print)\n");
        free(text);
    }
    ts_bufs want = {0};
    char *err = ts_run_mode(g, KILN_MODE_INTERP, in, &want, 0x5a);
    if (err) {
        fprintf(f, "reference: %s", err);
        free(err);
        bad = true;
        goto done;
    }
    for (int m = 0; m < nmodes && !bad; m++) {
        ts_bufs got = {0};
        err = ts_run_mode(g, modes[m], in, &got, 0xa5);
        if (err) {
            fputs(err, f);
            free(err);
            bad = true;
            break;
        }
        for (int i = 0; i < got.n; i++) {
            kiln_value_info vi = KILN_VALUE_INFO_INIT;
            kiln_graph_output(g, i, &vi);
            char what[128];
            snprintf(what, sizeof what, "%s: output %d '%s'", mode_name(modes[m]), i, vi.name);
            if (ts_compare(f, what, vi.dtype, vi.count, got.buf[i], want.buf[i],
                           tols ? &tols[i] : NULL))
                bad = true;
        }
        if (bad) {
            kiln_options opt = KILN_OPTIONS_INIT;
            opt.mode = modes[m];
            kiln_program *p = NULL;
            if (kiln_program_compile(g, &opt, &p) == KILN_OK) {
                char *plan = ts_plan_text(p);
                fprintf(f, "---- plan (%s)\n%s", mode_name(modes[m]), plan);
                free(plan);
            }
            kiln_program_free(p);
        }
        ts_bufs_free(&got);
    }
done:
    if (bad) {
        char *text = kiln_graph_to_string(g);
        fprintf(f, "---- graph\n%s", text ? text : "(cannot print)\n");
        free(text);
    }
    ts_bufs_free(&want);
    fclose(f);
    if (!bad) {
        free(rep);
        return NULL;
    }
    return rep;
}

void
ts_check_fused_eager(const kiln_graph *g, const ts_bufs *in, const ts_tol *tols,
                     const char *ctx)
{
    static const kiln_mode modes[2] = {KILN_MODE_FUSED, KILN_MODE_EAGER};
    char *rep = ts_check_modes(g, in, tols, 2, modes);
    if (rep) {
        fprintf(stderr, "FAIL %s\n%s\n", ctx, rep);
        char msg[512];
        snprintf(msg, sizeof msg, "%s: differs from the reference (details on stderr): %.300s",
                 ctx, rep);
        free(rep);
        ck_abort_msg("%s", msg);
    }
}

/* ---- bounds -------------------------------------------------------------------------------- */

void
ts_bounds_for(const kiln_graph *g, const ts_bufs *in, const bool *which, ts_bounds *b)
{
    int nout = g->noutputs;
    ck_assert_int_le(nout, TS_MAXIO);
    /* a zero-size input's buffer is NULL here (kiln_program_run accepts it); eb_reference
     * copies inputs that are outputs with memcpy, which must not get NULL even for 0
     * bytes, so those get a dummy (kiln check never passes NULL) */
    static const char empty[1];
    const void *bufs[TS_MAXIO];
    for (int k = 0; k < in->n; k++)
        bufs[k] = in->buf[k] ? in->buf[k] : empty;
    eb_output eb[TS_MAXIO];
    kiln_status st = eb_reference(g, bufs, eb);
    ck_assert_msg(st == KILN_OK, "errbound reference: %s", kiln_errmsg());
    *b = (ts_bounds){.n = nout};
    for (int i = 0; i < nout; i++) {
        if (!which[i])
            continue;
        size_t count = ir_shape_count(&g->nodes[g->outputs[i].node].type.shape);
        for (size_t e = 0; e < count; e++) {
            bool fin = !eb[i].bound || eb[i].bound[e] < INFINITY;
            b->finite += fin;
            b->infinite += !fin;
        }
        b->bound[i] = eb[i].bound; /* ours now: eb_free below must not see it */
        eb[i].bound = NULL;
    }
    eb_free(g, eb);
}

void
ts_bounds_free(ts_bounds *b)
{
    for (int i = 0; i < b->n; i++) {
        free(b->bound[i]);
        b->bound[i] = NULL;
    }
    b->n = 0;
}

/* ---- graphs -------------------------------------------------------------------------------- */

int
ts_outputs_inexact(const kiln_graph *g, bool *inexact)
{
    bool *t = calloc((size_t)g->nnodes + 1, sizeof *t);
    ck_assert_ptr_nonnull(t);
    for (int32_t n = 0; n < g->nnodes; n++) {
        const ir_node *nd = &g->nodes[n];
        bool fl = nd->nin > 0 && ir_dtype_is_float(g->nodes[nd->in[0]].type.dtype);
        t[n] = fl && ir_ops[nd->op].calc != IR_CALC_EXACT; /* ops.def: VMATH, REASSOC */
        for (int k = 0; k < nd->nin; k++)
            t[n] = t[n] || t[nd->in[k]];
    }
    int count = 0;
    for (int32_t i = 0; i < g->noutputs; i++) {
        inexact[i] = t[g->outputs[i].node];
        count += inexact[i];
    }
    free(t);
    return count;
}

/* ---- processes and files ------------------------------------------------------------------- */

int
ts_spawn_self(const char *const *args, const char *setenv)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    size_t ne = 0, na = 0;
    while (environ[ne])
        ne++;
    while (args && args[na])
        na++;
    char **env = calloc(ne + 2, sizeof *env);
    char **argv = calloc(na + 2, sizeof *argv);
    if (!env || !argv) {
        free(env);
        free(argv);
        return -1;
    }
    const char *eq = setenv ? strchr(setenv, '=') : NULL;
    size_t klen = eq ? (size_t)(eq - setenv) + 1 : 0; /* "NAME=" */
    size_t k = 0;
    for (size_t i = 0; i < ne; i++) {
        if (klen && strncmp(environ[i], setenv, klen) == 0)
            continue;
        if (strncmp(environ[i], "KILN_DUMP", 9) == 0)
            continue;
        env[k++] = environ[i];
    }
    if (setenv)
        env[k++] = (char *)setenv;
    env[k] = NULL;
    argv[0] = self;
    for (size_t i = 0; i < na; i++)
        argv[i + 1] = (char *)args[i];
    pid_t pid;
    int rc = posix_spawn(&pid, self, NULL, NULL, argv, env);
    free(env);
    free(argv);
    if (rc != 0)
        return -1;
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

char *
ts_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *b = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        b = malloc((size_t)n + 1);
        if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
            free(b);
            b = NULL;
        }
    }
    fclose(f);
    if (!b)
        return NULL;
    b[n] = '\0';
    if (len)
        *len = (size_t)n;
    return b;
}

void
ts_threads_children(const char *tag, char **bytes, size_t *len)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/kiln-%s-XXXXXX", tag);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    static const char *const counts[3] = {"1", "2", "4"};
    for (int k = 0; k < 3; k++) {
        char path[128], env[64];
        snprintf(path, sizeof path, "%s/t%s", dir, counts[k]);
        snprintf(env, sizeof env, "KILN_NUM_THREADS=%s", counts[k]);
        const char *args[] = {"--threads-child", path, NULL};
        int rc = ts_spawn_self(args, env);
        ck_assert_msg(rc == 0, "child with %s failed (exit %d)", env, rc);
        bytes[k] = ts_slurp(path, &len[k]);
        ck_assert_ptr_nonnull(bytes[k]);
        unlink(path);
        int32_t t;
        ck_assert_uint_ge(len[k], 4);
        memcpy(&t, bytes[k], 4);
        ck_assert_int_eq(t, atoi(counts[k]));
    }
    rmdir(dir);
    for (int k = 1; k < 3; k++) {
        ck_assert_uint_eq(len[k], len[0]);
        size_t first = len[0];
        for (size_t i = 4; i < len[0] && first == len[0]; i++)
            if (bytes[k][i] != bytes[0][i])
                first = i;
        ck_assert_msg(first == len[0], "1 and %s threads differ at byte %zu of %zu", counts[k],
                      first, len[0]);
    }
}
