/* llvm.h — lib/jit's private view of LLVM: the engine that turns a module into code.
 * Only files of lib/jit include this (and so <llvm-c/...>). */
#ifndef KILN_JIT_LLVM_H
#define KILN_JIT_LLVM_H

#include <llvm-c/Core.h>
#include <llvm-c/Orc.h>

#include "jit.h"

/* A module being built, in its own thread-safe context. */
typedef struct jit_unit {
    LLVMOrcThreadSafeContextRef tsc;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
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
/* Verify, optimise for the host CPU, verify again, generate code, add it to the JIT and
 * look up `n` function names.  Consumes the unit (also on error).  LLVM's messages are
 * copied into kiln's error: KILN_ERR_INTERNAL for a module that does not verify (before or
 * after optimisation), KILN_ERR_COMPILE for a failed optimisation, code generation, link
 * or lookup.  From jit_unit_new to the end of jit_unit_compile (or jit_unit_dispose) the
 * calling thread's LLVM fatal errors name the module (engine.c). */
IR_HIDDEN kiln_status jit_unit_compile(jit_unit *u, int n, const char *const *names, void **addrs,
                                       jit_code **code, jit_dumps *dumps);
IR_HIDDEN void jit_code_free(jit_code *c);
/* Tests only: compile with this pass pipeline instead of kiln's (NULL restores it).  Not
 * thread-safe; call before compiling.  The string must outlive its use. */
IR_HIDDEN void jit_engine_test_passes(const char *pipeline);

/* Compile statistics for the API and tests: modules compiled and milliseconds spent,
 * objects loaded from the disk cache and milliseconds spent, and the one-time start-up
 * (LLVM and LLJIT initialisation; of it, LLJIT's creation) in milliseconds. */
typedef struct jit_stats {
    uint64_t compiles;
    double compile_ms;
    uint64_t loads;
    double load_ms;
    double startup_ms;
    double lljit_ms;
} jit_stats;
IR_HIDDEN void jit_stats_get(jit_stats *s);

IR_HIDDEN double jit_now_ms(void);

#endif
