/* host.c — what the JIT compiles for: the host CPU name and features from LLVM, and the
 * vector width they allow.  Detected once, at first use, never assumed at build time. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include "jit.h"

static jit_host host;
static char version[32];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static bool
has_feature(const char *features, const char *f)
{
    /* Features are "+name" or "-name", comma separated. */
    size_t n = strlen(f);
    for (const char *p = features; (p = strstr(p, f)) != NULL; p += n) {
        bool starts = p > features && p[-1] == '+' && (p == features + 1 || p[-2] == ',');
        bool ends = p[n] == ',' || p[n] == '\0';
        if (starts && ends)
            return true;
    }
    return false;
}

static void
detect(void)
{
    /* The strings LLVM returns live as long as the process: kiln keeps them. */
    host.cpu = LLVMGetHostCPUName();
    host.features = LLVMGetHostCPUFeatures();
    host.triple = LLVMGetDefaultTargetTriple();
    if (has_feature(host.features, "avx512f"))
        host.vector_bits = 512;
    else if (has_feature(host.features, "avx2"))
        host.vector_bits = 256;
    else
        host.vector_bits = 128;
    /* Tests only: compile for narrower vectors than the host has (AVX2's 256 or SSE's
     * 128 bits, as on a machine without AVX-512), to exercise those paths here. */
    const char *nb = getenv("KILN_TEST_VECTOR_BITS");
    if (nb && (!strcmp(nb, "256") || !strcmp(nb, "128")) && atoi(nb) < host.vector_bits)
        host.vector_bits = atoi(nb);
    unsigned major, minor, patch;
    LLVMGetVersion(&major, &minor, &patch);
    snprintf(version, sizeof version, "%u.%u.%u", major, minor, patch);
    host.llvm_version = version;
}

const jit_host *
jit_host_info(void)
{
    pthread_once(&once, detect);
    return &host;
}
