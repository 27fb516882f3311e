/* host.c — what the JIT compiles for: the host CPU name and features from LLVM, the
 * vector width they allow, and the size of the last-level cache (which decides when
 * kernels stream their stores, and how much `kiln bench` reads to evict the caches).
 * Detected once, at first use, never assumed at build time.  kiln_host_info_get is the
 * public view of the same facts. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The largest data or unified cache of cpu0 in sysfs ("32768K"), 0 if none is listed. */
static size_t
sysfs_llc(void)
{
    size_t best = 0;
    for (int i = 0; i < 16; i++) {
        char path[96], type[32] = "", size[32] = "";
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        bool ok = fgets(type, sizeof type, f) != NULL;
        fclose(f);
        if (!ok || !strncmp(type, "Instruction", 11))
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!(f = fopen(path, "r")))
            continue;
        ok = fgets(size, sizeof size, f) != NULL;
        fclose(f);
        char *end;
        unsigned long long v = ok ? strtoull(size, &end, 10) : 0;
        if (!ok || end == size)
            continue;
        if (*end == 'K')
            v <<= 10;
        else if (*end == 'M')
            v <<= 20;
        if (v > best)
            best = (size_t)v;
    }
    return best;
}

/* sysfs first: glibc's sysconf reads cpuid, which under some hypervisors reports the
 * whole host's L3 (320 MiB on the development VM, whose sysfs and lscpu say 32 MiB). */
static void
detect_llc(void)
{
    host.llc_bytes = sysfs_llc();
    host.llc_source = "sysfs";
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (!host.llc_bytes) {
        long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
        host.llc_bytes = l3 > 0 ? (size_t)l3 : l2 > 0 ? (size_t)l2 : 0;
        host.llc_source = "sysconf";
    }
#endif
    if (!host.llc_bytes) {
        host.llc_bytes = (size_t)32 << 20;
        host.llc_source = "default";
    }
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
    int nb = ir_config_get()->test_vector_bits;
    if (nb && nb < host.vector_bits)
        host.vector_bits = nb;
    unsigned major, minor, patch;
    LLVMGetVersion(&major, &minor, &patch);
    snprintf(version, sizeof version, "%u.%u.%u", major, minor, patch);
    host.llvm_version = version;
    detect_llc();
}

const jit_host *
jit_host_info(void)
{
    pthread_once(&once, detect);
    return &host;
}

kiln_status
kiln_host_info_get(kiln_host_info *info)
{
    const jit_host *h = jit_host_info();
    kiln_host_info hi = {
        .size = sizeof hi,
        .cpu = h->cpu,
        .features = h->features,
        .triple = h->triple,
        .llvm_version = h->llvm_version,
        .vector_bits = h->vector_bits,
        .llc_bytes = h->llc_bytes,
        .llc_source = h->llc_source,
    };
    return ir_abi_out("kiln_host_info_get", "kiln_host_info", info, &hi, sizeof hi,
                      offsetof(kiln_host_info, cpu) + sizeof hi.cpu);
}
