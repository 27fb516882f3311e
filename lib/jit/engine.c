/* engine.c — ORC LLJIT through LLVM's C API.
 *
 * Facts measured on the development machine with LLVM 19.1.7 that shape this file:
 *  - LLVMRunPasses vectorises nothing unless given a target machine for the host CPU
 *    name and features; the JIT generates code for the same CPU and features.
 *  - Concurrent add+lookup on one LLJIT crashed: one lock serialises add/lookup/remove
 *    (runs never take it).  Optimisation and code generation take no lock: each thread
 *    uses a target machine of its own, so a plan's modules are generated in parallel.
 *  - One unresolved symbol fails every symbol of its module: modules are verified first.
 *  - Emitting assembly mutates the module: dumps are taken from a clone.
 *  - Each compiled module gets its own resource tracker, so freeing a program frees its
 *    machine code and memory plateaus over many compile/free cycles.
 *  - LLVM starts lazily: the target, its machine for LLJIT and LLJIT itself at the first
 *    compile or load of a cached object (about 1 ms, LLJIT half of it), the optimiser's
 *    target machine at the first compile only.  Loading libLLVM.so and its static
 *    constructors (tens of ms) happens before main and is not kiln's to defer.
 *  - A bare `instcombine` in a pass string verifies that it reached a fixpoint, and a
 *    miss is report_fatal_error: `a = abs(x); o = gelu_erf(a)` in f32 killed the process
 *    ("Instruction Combining did not reach a fixpoint after 1 iterations").  The pipeline
 *    uses `instcombine<no-verify-fixpoint>`, which stops quietly after its iterations.
 *
 * Never fatal on valid input.  LLVM calls report_fatal_error (print, then exit or abort)
 * where kiln could reach it by:
 *  - a module that does not verify, given to the optimiser or to code generation (whose
 *    own verifier is fatal): it is verified with LLVMReturnStatusAction before
 *    optimising and again before code generation, and the message becomes kiln's error;
 *  - a pass option with a fatal check (instcombine's fixpoint, above; VerifyEach is off);
 *  - a pipeline string LLVM cannot parse: LLVMRunPasses returns that as an error.
 * What is left (instruction selection finding no pattern, LLVM running out of memory)
 * would be a bug in kiln or LLVM: the fatal-error handler installed at start-up names the
 * module, kernel and compilation step of the calling thread, then aborts like an IR_ASSERT.
 * A fatal error on a thread that is not compiling for kiln (the host's own use of LLVM)
 * is printed as LLVM prints it and left to LLVM.  The handler is process-wide, as LLVM's
 * C API has it: kiln installs it once, at its first compile; a host that installs its own
 * later replaces kiln's (and with it the module names in the message).  Verifying after
 * optimisation costs nothing measurable: no verifier symbol reaches 0.1% of a profile of
 * check_llvm_sweep, where LLVM is 89% of the time.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Error.h>
#include <llvm-c/ErrorHandling.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "llvm.h"

struct jit_code {
    LLVMOrcResourceTrackerRef rt;
};

/* kiln's pass pipeline (see jit_unit_compile); a test may swap it (jit_engine_test_passes). */
#define KILN_PASSES "always-inline,function(sroa,early-cse,instcombine<no-verify-fixpoint>,simplifycfg)"
static const char *passes = KILN_PASSES;

/* What the calling thread is compiling, for the fatal-error handler: the module's name and
 * the step ("optimising", ...).  Empty outside kiln's compilations. */
static _Thread_local char cur_module[64];
static _Thread_local const char *cur_step;

static void
during(const char *step, const char *module)
{
    cur_step = step;
    if (module)
        snprintf(cur_module, sizeof cur_module, "%s", module);
    else if (!step)
        cur_module[0] = '\0';
}

static void
fatal_handler(const char *reason)
{
    if (!cur_step) {
        fprintf(stderr, "LLVM ERROR: %s\n", reason ? reason : "(no reason given)");
        return; /* LLVM exits as it would without kiln */
    }
    char what[1024];
    snprintf(what, sizeof what, "LLVM fatal error while %s module '%s': %s", cur_step, cur_module,
             reason ? reason : "(no reason given)");
    ir_bug(__FILE__, __LINE__, what);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* the JIT (add, lookup, remove), stats */
static LLVMOrcLLJITRef jit;
static char *init_error;            /* set when start-up failed */
static pthread_once_t opt_once = PTHREAD_ONCE_INIT;
static char *opt_error;
static char *layout;                /* the host's data layout, for new modules */
static jit_stats stats;

/* Target machines for optimisation, code generation and assembly dumps, one per thread
 * generating code at a time: LLVM's code generator must not run on two threads with one
 * target machine.  A thread takes one (or makes one) and gives it back; at most TM_IDLE
 * of each optimisation level (full, and fast for compact units) wait here for the next
 * compile. */
#define TM_IDLE 16
static pthread_mutex_t tm_lock = PTHREAD_MUTEX_INITIALIZER;
static LLVMTargetMachineRef tm_idle[2][TM_IDLE];
static int ntm_idle[2];

double
jit_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static char *
take_error(LLVMErrorRef e)
{
    char *m = LLVMGetErrorMessage(e);
    char *copy = strdup(m ? m : "unknown LLVM error");
    LLVMDisposeErrorMessage(m);
    return copy;
}

/* A target machine for the host CPU: code generation at LLVM's default level, or with
 * `fast` at none (fast instruction selection, the fast register allocator, no loop
 * strength reduction: compact units, jit_tier). */
static LLVMTargetMachineRef
host_tm(bool fast, char **err)
{
    const jit_host *h = jit_host_info();
    LLVMTargetRef target;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(h->triple, &target, &msg)) {
        *err = strdup(msg ? msg : "no target for the host triple");
        LLVMDisposeMessage(msg);
        return NULL;
    }
    /* The small code model and position-independent code, as LLJIT itself configures
     * code it compiles for JITLink, its linker on x86-64 ELF (which keeps an object's
     * sections together and stubs far calls): constants are then addressed relative to
     * the instruction pointer, so code generation hoists their loads out of loops, where
     * JIT's default large model needed a movabsq for each and loaded them again in every
     * iteration (docs/benchmarking.md, "Code model"). */
    LLVMTargetMachineRef tm =
        LLVMCreateTargetMachine(target, h->triple, h->cpu, h->features,
                                fast ? LLVMCodeGenLevelNone : LLVMCodeGenLevelDefault,
                                LLVMRelocPIC, LLVMCodeModelSmall);
    if (!tm)
        *err = strdup("LLVMCreateTargetMachine failed for the host CPU");
    return tm;
}

static void
start_llvm(void)
{
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    char *err = NULL;
    LLVMTargetMachineRef jit_tm = host_tm(false, &err);
    if (!jit_tm) {
        init_error = err;
        return;
    }
    double t0 = jit_now_ms();
    LLVMOrcLLJITBuilderRef b = LLVMOrcCreateLLJITBuilder();
    LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
        b, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(jit_tm));
    LLVMErrorRef e = LLVMOrcCreateLLJIT(&jit, b);
    if (e) {
        init_error = take_error(e);
        jit = NULL;
        return;
    }
    /* Kernels may call into the process (libm for the few ops kiln does not vectorise). */
    LLVMOrcDefinitionGeneratorRef gen;
    e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
        &gen, LLVMOrcLLJITGetGlobalPrefix(jit), NULL, NULL);
    if (e) {
        init_error = take_error(e);
        return;
    }
    LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(jit), gen);
    stats.lljit_ms = jit_now_ms() - t0;
}

static void
start(void)
{
    double t0 = jit_now_ms();
    LLVMInstallFatalErrorHandler(fatal_handler);
    during("starting LLVM for", "(none yet)");
    start_llvm();
    during(NULL, NULL);
    stats.startup_ms = jit_now_ms() - t0;
}

static void tm_give(bool fast, LLVMTargetMachineRef tm);

/* The first target machine for code generation and the data layout, made at the first
 * compile: a process whose kernels all come from the disk cache never makes them. */
static void
start_opt(void)
{
    double t0 = jit_now_ms();
    char *err = NULL;
    LLVMTargetMachineRef tm = host_tm(false, &err);
    if (!tm) {
        opt_error = err;
        return;
    }
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
    char *rep = LLVMCopyStringRepOfTargetData(dl);
    layout = strdup(rep);
    LLVMDisposeMessage(rep);
    LLVMDisposeTargetData(dl);
    if (!layout)
        opt_error = strdup("out of memory");
    tm_give(false, tm);
    pthread_mutex_lock(&lock);
    stats.startup_ms += jit_now_ms() - t0;
    pthread_mutex_unlock(&lock);
}

/* A target machine of the calling thread's own until tm_give; NULL (and *err) if LLVM
 * cannot make one. */
static LLVMTargetMachineRef
tm_take(bool fast, char **err)
{
    LLVMTargetMachineRef tm = NULL;
    pthread_mutex_lock(&tm_lock);
    if (ntm_idle[fast] > 0)
        tm = tm_idle[fast][--ntm_idle[fast]];
    pthread_mutex_unlock(&tm_lock);
    if (tm)
        return tm;
    double t0 = jit_now_ms();
    tm = host_tm(fast, err);
    pthread_mutex_lock(&lock);
    stats.startup_ms += jit_now_ms() - t0;
    pthread_mutex_unlock(&lock);
    return tm;
}

static void
tm_give(bool fast, LLVMTargetMachineRef tm)
{
    pthread_mutex_lock(&tm_lock);
    if (ntm_idle[fast] < TM_IDLE) {
        tm_idle[fast][ntm_idle[fast]++] = tm;
        tm = NULL;
    }
    pthread_mutex_unlock(&tm_lock);
    if (tm)
        LLVMDisposeTargetMachine(tm);
}

/* LLVM and LLJIT are up (for loading objects); with `compile`, the optimiser too. */
static kiln_status
started(const char *api, bool compile)
{
    pthread_once(&once, start);
    if (!init_error && jit && compile)
        pthread_once(&opt_once, start_opt);
    const char *e = init_error ? init_error : compile && opt_error ? opt_error : NULL;
    if (e || !jit)
        return ir_error(KILN_ERR_COMPILE, "%s: compilation failed: LLVM start-up: %s", api,
                        e ? e : "unknown error");
    return KILN_OK;
}

/* Remove a code object's machine code from the JIT and free it; lock held. */
static void
remove_locked(jit_code *c)
{
    const char *step = cur_step; /* a unit may be under construction on this thread */
    char module[sizeof cur_module];
    memcpy(module, cur_module, sizeof module);
    during("freeing the code of", "(a freed program's kernel)");
    LLVMErrorRef e = LLVMOrcResourceTrackerRemove(c->rt);
    if (e)
        LLVMConsumeError(e); /* nothing useful to do: the code is unreachable either way */
    LLVMOrcReleaseResourceTracker(c->rt);
    during(step, step ? module : NULL);
    ir_free(c);
}

kiln_status
jit_unit_new(jit_unit *u, const char *name)
{
    memset(u, 0, sizeof *u);
    kiln_status st = started("kiln_jit", true);
    if (st)
        return st;
    during("building", name);
    snprintf(u->name, sizeof u->name, "%s", name);
    u->tsc = LLVMOrcCreateNewThreadSafeContext();
    u->ctx = LLVMOrcThreadSafeContextGetContext(u->tsc);
    u->mod = LLVMModuleCreateWithNameInContext(name, u->ctx);
    LLVMSetTarget(u->mod, jit_host_info()->triple);
    LLVMSetDataLayout(u->mod, layout);
    return KILN_OK;
}

void
jit_unit_dispose(jit_unit *u)
{
    if (u->mod)
        LLVMDisposeModule(u->mod);
    if (u->tsc)
        LLVMOrcDisposeThreadSafeContext(u->tsc);
    if (u->obj)
        LLVMDisposeMemoryBuffer(u->obj);
    free(u->msg);
    memset(u, 0, sizeof *u);
    during(NULL, NULL);
}

const char *
jit_engine_passes(void)
{
    return passes;
}

void
jit_engine_test_passes(const char *pipeline)
{
    passes = pipeline ? pipeline : KILN_PASSES;
}

static char *
emit_asm(LLVMTargetMachineRef tm, LLVMModuleRef mod)
{
    LLVMModuleRef clone = LLVMCloneModule(mod);
    LLVMMemoryBufferRef buf = NULL;
    char *msg = NULL, *out;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, clone, LLVMAssemblyFile, &msg, &buf)) {
        out = strdup(msg ? msg : "assembly emission failed");
        LLVMDisposeMessage(msg);
    } else {
        size_t n = LLVMGetBufferSize(buf);
        out = malloc(n + 1);
        if (out) {
            memcpy(out, LLVMGetBufferStart(buf), n);
            out[n] = '\0';
        }
        LLVMDisposeMemoryBuffer(buf);
    }
    LLVMDisposeModule(clone);
    return out;
}

static char *
print_module(LLVMModuleRef mod)
{
    char *s = LLVMPrintModuleToString(mod);
    char *copy = strdup(s);
    LLVMDisposeMessage(s);
    return copy;
}

/* Keep a generation error in the unit, for jit_unit_link to report (see llvm.h). */
static void
unit_fail(jit_unit *u, kiln_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *m = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (m) {
        va_start(ap, fmt);
        vsnprintf(m, (size_t)len + 1, fmt, ap);
        va_end(ap);
    }
    u->st = st;
    free(u->msg);
    u->msg = m;
}

/* LLVMVerifyModule with the status action (the others print or abort); LLVM's message
 * goes into the unit's error.  `when`: "generated" or "optimised". */
static bool
verify(jit_unit *u, const char *api, const char *when)
{
    char *msg = NULL;
    if (!LLVMVerifyModule(u->mod, LLVMReturnStatusAction, &msg)) {
        LLVMDisposeMessage(msg);
        return true;
    }
    unit_fail(u, KILN_ERR_INTERNAL, "%s: internal error: %s module %s does not verify: %s", api,
              when, LLVMGetModuleIdentifier(u->mod, &(size_t){0}), msg ? msg : "");
    LLVMDisposeMessage(msg);
    return false;
}

/* Add the object `obj` (taken) to the JIT with a resource tracker of its own and look up
 * the n names; lock held.  On error nothing stays in the JIT. */
static kiln_status
link_locked(LLVMMemoryBufferRef obj, int n, const char *const *names, void **addrs,
            jit_code **code)
{
    const char *api = "kiln_jit";
    kiln_status st = KILN_OK;
    *code = NULL;
    jit_code *c = ir_calloc(1, sizeof *c);
    if (!c) {
        LLVMDisposeMemoryBuffer(obj);
        return ir_error(KILN_ERR_NOMEM, "%s: out of memory", api);
    }
    c->rt = LLVMOrcJITDylibCreateResourceTracker(LLVMOrcLLJITGetMainJITDylib(jit));
    LLVMErrorRef e = LLVMOrcLLJITAddObjectFileWithRT(jit, c->rt, obj); /* takes the buffer */
    if (e) {
        char *m = take_error(e);
        st = ir_error(KILN_ERR_COMPILE, "%s: compilation failed: %s", api, m);
        free(m);
        LLVMOrcReleaseResourceTracker(c->rt);
        ir_free(c);
        return st;
    }
    for (int i = 0; i < n; i++) {
        LLVMOrcExecutorAddress a = 0;
        e = LLVMOrcLLJITLookup(jit, &a, names[i]);
        if (e) {
            char *m = take_error(e);
            st = ir_error(KILN_ERR_COMPILE, "%s: compilation failed: lookup of %s: %s", api,
                          names[i], m);
            free(m);
            break;
        }
        addrs[i] = (void *)(uintptr_t)a;
    }
    if (st) {
        remove_locked(c);
        return st;
    }
    *code = c;
    return KILN_OK;
}

void
jit_unit_generate(jit_unit *u, jit_dumps *dumps)
{
    const char *api = "kiln_jit";
    during("verifying", u->name);
    if (!verify(u, api, "generated"))
        goto done;
    if (dumps && dumps->want_llvm)
        dumps->llvm = print_module(u->mod);

    char *err = NULL;
    bool fast = u->compact || u->quick; /* the code generator's level */
    LLVMTargetMachineRef tm = tm_take(fast, &err);
    if (!tm) {
        unit_fail(u, KILN_ERR_COMPILE, "%s: compilation failed: %s", api, err ? err : "");
        free(err);
        goto done;
    }
    double t0 = jit_now_ms();
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    /* kiln emits explicit vector code, so the optimiser has little left to find: inline the
     * vector math, fold and clean up.  Measured against default<O2> with aggressive code
     * generation: compile time -35..45%, run time the same (docs/jit.md).  Compact units
     * skip it: their vector math stays out of line, and the rest saved 12% of a 5,000-op
     * wide graph's compile at no measurable cost in run time (docs/jit.md, "Compact code"). */
    during("optimising", NULL);
    LLVMErrorRef e = u->compact ? NULL : LLVMRunPasses(u->mod, passes, tm, po);
    LLVMDisposePassBuilderOptions(po);
    double t1 = jit_now_ms();
    u->opt_ms = t1 - t0;
    if (e) {
        char *m = take_error(e);
        unit_fail(u, KILN_ERR_COMPILE, "%s: compilation failed: optimisation: %s", api, m);
        free(m);
        goto give;
    }
    /* Code generation's own verifier would be fatal on a module the optimiser broke (a
     * compact unit was not optimised: verified above). */
    during("verifying the optimised", NULL);
    if (!u->compact && !verify(u, api, "optimised"))
        goto give;
    if (dumps && dumps->want_opt)
        dumps->opt = print_module(u->mod);
    during("emitting assembly for", NULL);
    if (dumps && dumps->want_asm)
        dumps->asm_text = emit_asm(tm, u->mod);

    /* Code generation with kiln's own target machine, then the object goes to the JIT's
     * linker: LLJIT's IR layer would construct a fresh target machine (and subtarget) for
     * every module, which costs more than compiling a small kernel. */
    char *cmsg = NULL;
    during("generating code for", NULL);
    double t2 = jit_now_ms();
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, u->mod, LLVMObjectFile, &cmsg, &u->obj)) {
        unit_fail(u, KILN_ERR_COMPILE, "%s: compilation failed: code generation: %s", api,
                  cmsg ? cmsg : "");
        LLVMDisposeMessage(cmsg);
        u->obj = NULL;
    }
    u->gen_ms = jit_now_ms() - t2;
    if (u->obj && dumps && dumps->want_obj) {
        /* a copy for the disk cache (the JIT takes the buffer) */
        dumps->obj_len = LLVMGetBufferSize(u->obj);
        dumps->obj = ir_malloc(dumps->obj_len ? dumps->obj_len : 1);
        if (dumps->obj)
            memcpy(dumps->obj, LLVMGetBufferStart(u->obj), dumps->obj_len);
        else
            dumps->obj_len = 0;
    }
give:
    tm_give(fast, tm);
done:
    LLVMDisposeModule(u->mod);
    u->mod = NULL;
    during(NULL, NULL);
}

kiln_status
jit_unit_link(jit_unit *u, int n, const char *const *names, void **addrs, jit_code **code)
{
    kiln_status st;
    *code = NULL;
    if (u->st || !u->obj) {
        st = u->msg ? ir_error(u->st, "%s", u->msg)
                    : ir_error(KILN_ERR_NOMEM, "kiln: out of memory");
        jit_unit_dispose(u);
        return st;
    }
    LLVMMemoryBufferRef obj = u->obj;
    u->obj = NULL;
    pthread_mutex_lock(&lock);
    double t0 = jit_now_ms();
    during("linking", u->name);
    st = link_locked(obj, n, names, addrs, code);
    double link = jit_now_ms() - t0;
    stats.compiles++;
    stats.opt_ms += u->opt_ms;
    stats.gen_ms += u->gen_ms;
    stats.link_ms += link;
    stats.compile_ms += u->opt_ms + u->gen_ms + link;
    pthread_mutex_unlock(&lock);
    jit_unit_dispose(u);
    return st;
}

kiln_status
jit_unit_compile(jit_unit *u, int n, const char *const *names, void **addrs, jit_code **code,
                 jit_dumps *dumps)
{
    jit_unit_generate(u, dumps);
    return jit_unit_link(u, n, names, addrs, code);
}

kiln_status
jit_object_load(const void *obj, size_t len, const char *name, int n, const char *const *names,
                void **addrs, void **code)
{
    const char *api = "kiln_jit";
    *code = NULL;
    kiln_status st = started(api, false);
    if (st)
        return st;
    pthread_mutex_lock(&lock);
    double t0 = jit_now_ms();
    during("loading the cached object of", name);
    LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(obj, len, name);
    st = buf ? link_locked(buf, n, names, addrs, (jit_code **)code)
             : ir_error(KILN_ERR_NOMEM, "%s: out of memory", api);
    stats.loads++;
    stats.load_ms += jit_now_ms() - t0;
    pthread_mutex_unlock(&lock);
    during(NULL, NULL);
    return st;
}

void
jit_code_free(jit_code *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&lock);
    remove_locked(c);
    pthread_mutex_unlock(&lock);
}

void
jit_stats_get(jit_stats *s)
{
    pthread_mutex_lock(&lock);
    *s = stats;
    pthread_mutex_unlock(&lock);
}
