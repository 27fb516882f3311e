/* jit.h — lib/jit's internal interface.  Only lib/jit includes <llvm-c/...>; nothing here
 * names an LLVM type. */
#ifndef KILN_JIT_H
#define KILN_JIT_H

#include "ir.h"

/* The host CPU as LLVM sees it, detected once at first use (thread-safe).  Kernels are
 * compiled for exactly this CPU name and feature string. */
typedef struct jit_host {
    const char *cpu;      /* e.g. "znver4" */
    const char *features; /* LLVM feature string, "+avx2,+avx512f,..." */
    const char *triple;   /* e.g. "x86_64-pc-linux-gnu" */
    int vector_bits;      /* widest usable vector register: 512, 256 or 128 */
    const char *llvm_version;
} jit_host;

IR_HIDDEN const jit_host *jit_host_info(void);

#endif
