/* llvm.h — lib/jit's private view of LLVM: the engine that turns a module into code.
 * Only files of lib/jit include this (and so <llvm-c/...>). */
#ifndef KILN_JIT_LLVM_H
#define KILN_JIT_LLVM_H

#include <llvm-c/Core.h>
#include <llvm-c/Orc.h>

#include "jit.h"

/* A module being built, in its own thread-safe context; after jit_unit_generate, its object
 * code or the error that stopped it. */
typedef struct jit_unit {
    LLVMOrcThreadSafeContextRef tsc;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMMemoryBufferRef obj;
    kiln_status st; /* of generation: reported by jit_unit_link */
    char *msg;      /* its message (malloc'd; NULL: out of memory) */
    double opt_ms, gen_ms;
    char name[64]; /* the module's, for messages */
    bool compact;  /* JIT_TIER_COMPACT kernels: LLVM's fast code generator */
    bool quick;    /* a first tier (cache.c, KILN_TIERED): optimised as in full, then LLVM's
                    * fast code generator */
} jit_unit;

/* What to capture while compiling (each a malloc'd string the caller frees). */
typedef struct jit_dumps {
    bool want_llvm, want_opt, want_asm;
    char *llvm; /* IR before optimisation */
    char *opt;  /* IR after optimisation */
    char *asm_text;
    bool want_obj; /* a copy of the object code (for the disk cache) */
    void *obj;
    size_t obj_len;
} jit_dumps;

/* Compiled code; freeing it frees the machine code (ORC resource tracker). */
typedef struct jit_code jit_code;

/* A new module for the host triple and data layout.  Errors: KILN_ERR_COMPILE (LLVM could
 * not be initialised for this host), KILN_ERR_NOMEM. */
IR_HIDDEN kiln_status jit_unit_new(jit_unit *u, const char *name);
IR_HIDDEN void jit_unit_dispose(jit_unit *u);
/* Verify, optimise for the host CPU, verify again and generate the object code, which the
 * unit keeps (the module is freed).  Takes no lock: several threads may each generate a
 * unit of their own at once (each thread takes a target machine of its own).  Raises no
 * error: a failure is kept in the unit (st, msg) for jit_unit_link, so the calling thread,
 * not a worker, reports it: KILN_ERR_INTERNAL for a module that does not verify (before or
 * after optimisation), KILN_ERR_COMPILE for a failed optimisation or code generation.
 * While it runs, the thread's LLVM fatal errors name the module (engine.c). */
IR_HIDDEN void jit_unit_generate(jit_unit *u, jit_dumps *dumps);
/* Report the generation's error, or add the object to the JIT (serialised: one lock) and
 * look up `n` function names (KILN_ERR_COMPILE when either fails).  Consumes the unit. */
IR_HIDDEN kiln_status jit_unit_link(jit_unit *u, int n, const char *const *names, void **addrs,
                                    jit_code **code);
/* jit_unit_generate, then jit_unit_link.  From jit_unit_new to the end of jit_unit_compile
 * (or jit_unit_dispose) the calling thread's LLVM fatal errors name the module. */
IR_HIDDEN kiln_status jit_unit_compile(jit_unit *u, int n, const char *const *names, void **addrs,
                                       jit_code **code, jit_dumps *dumps);
IR_HIDDEN void jit_code_free(jit_code *c);
/* Tests only: compile with this pass pipeline instead of kiln's (NULL restores it).  Not
 * thread-safe; call before compiling.  The string must outlive its use. */
IR_HIDDEN void jit_engine_test_passes(const char *pipeline);

/* Compile statistics for the API and tests: modules compiled and milliseconds spent (of it
 * optimising, generating code and linking; summed over the threads that generated them),
 * objects loaded from the disk cache and milliseconds spent, and the one-time start-up
 * (LLVM and LLJIT initialisation; of it, LLJIT's creation) in milliseconds. */
typedef struct jit_stats {
    uint64_t compiles;
    double compile_ms, opt_ms, gen_ms, link_ms;
    uint64_t loads;
    double load_ms;
    double startup_ms;
    double lljit_ms;
} jit_stats;
IR_HIDDEN void jit_stats_get(jit_stats *s);

#endif
