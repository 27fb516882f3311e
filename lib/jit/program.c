/* program.c — programs: what kiln_scope_end hands back.  The completed graph is owned by
 * the program together with its executor.  Until the LLVM pipeline lands every mode runs
 * the reference interpreter behind this same API (kiln_program_mode says so honestly). */
#include <string.h>

#include "capture.h"
#include "jit.h"

#define PROGRAM_MAGIC 0x6b707267u /* "kprg" */

struct kiln_program {
    uint32_t magic;
    kiln_graph *graph;
    kiln_mode requested; /* what the options asked for */
    kiln_mode mode;      /* what runs */
};

static kiln_status
program_check(const kiln_program *p, const char *api)
{
    if (!p)
        return ir_error(KILN_ERR_MISUSE, "%s: invalid handle: program is NULL", api);
    if (p->magic != PROGRAM_MAGIC)
        return ir_error(KILN_ERR_MISUSE,
                        "%s: invalid handle: not a live kiln_program (freed or foreign)", api);
    return KILN_OK;
}

/* Compile `g` (taking ownership) into a program. */
static kiln_status
program_new(const char *api, kiln_graph *g, const kiln_options *o, kiln_program **out)
{
    kiln_mode mode = o ? o->mode : KILN_MODE_FUSED;
    if ((int)mode < 0 || mode >= KILN_MODE_COUNT) {
        kiln_graph_free(g);
        return ir_error(KILN_ERR_INVALID_ARG, "%s: invalid argument: mode %d", api, (int)mode);
    }
    kiln_program *p = ir_calloc(1, sizeof *p);
    if (!p) {
        kiln_graph_free(g);
        return ir_error(KILN_ERR_NOMEM, "%s: out of memory", api);
    }
    p->magic = PROGRAM_MAGIC;
    p->graph = g;
    p->requested = mode;
    p->mode = KILN_MODE_INTERP;
    *out = p;
    return KILN_OK;
}

kiln_status
kiln_scope_end(kiln_scope scope, int noutputs, const kiln_tensor *outputs,
               const kiln_options *options, kiln_program **program)
{
    const char *api = "kiln_scope_end";
    kiln_graph *g;
    if (program)
        *program = NULL;
    if (!program) {
        /* Still end the scope so the device is released. */
        kiln_scope_abort(scope);
        return ir_error(KILN_ERR_INVALID_ARG, "%s: invalid argument: program is NULL", api);
    }
    kiln_status st = cap_scope_finish(api, scope, noutputs, outputs, options, &g);
    if (st)
        return st;
    return program_new(api, g, options, program);
}

kiln_status
kiln_capture_scope(kiln_device *device, kiln_capture_fn fn, void *user,
                   const kiln_options *options, kiln_program **program)
{
    const char *api = "kiln_capture_scope";
    if (program)
        *program = NULL;
    if (!fn || !program)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: invalid argument: %s is NULL", api,
                        fn ? "program" : "fn");
    kiln_scope s = kiln_scope_begin(device);
    if (kiln_scope_is_null(s))
        return kiln_errcode();
    kiln_status st = fn(s, user);
    if (st) {
        /* The callback failed: release the device, keep the callback's error.  If the
         * thread's error is unrelated (the callback returned a code without a kiln error),
         * say so rather than show a stale message. */
        kiln_status code = kiln_errcode();
        char msg[1024];
        strncpy(msg, kiln_errmsg(), sizeof msg - 1);
        msg[sizeof msg - 1] = '\0';
        kiln_scope_abort(s);
        if (code == st)
            ir_error(st, "%s", msg);
        else
            ir_error(st, "%s: callback failed: %s", api, kiln_status_str(st));
        return st;
    }
    return kiln_scope_end(s, 0, NULL, options, program);
}

kiln_status
kiln_program_run(kiln_program *p, const void *const *inputs, void *const *outputs)
{
    kiln_status st = program_check(p, "kiln_program_run");
    if (st)
        return st;
    return kiln_graph_interpret(p->graph, inputs, outputs);
}

void
kiln_program_free(kiln_program *p)
{
    if (!p || program_check(p, "kiln_program_free"))
        return;
    p->magic = 0;
    kiln_graph_free(p->graph);
    ir_free(p);
}

const kiln_graph *
kiln_program_graph(const kiln_program *p)
{
    return program_check(p, "kiln_program_graph") ? NULL : p->graph;
}

kiln_mode
kiln_program_mode(const kiln_program *p)
{
    return program_check(p, "kiln_program_mode") ? (kiln_mode)-1 : p->mode;
}
