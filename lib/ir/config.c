/* config.c — every environment variable the library reads, read once, here.
 *
 * The library's configuration from the environment is one snapshot, taken the first time
 * any part of the library asks for it (ir_config) and never changed behind its back: a
 * kernel compiled later in the process sees the same settings as the first one, no
 * thread reads the environment while another may be changing it (getenv is not safe
 * against setenv), and this table is the one list of what is read:
 *
 *   variable               field              meaning (where it is used)
 *   KILN_ABORT_ON_MISUSE   abort_on_misuse    "1...": a misuse-class error prints and aborts
 *                                             (err.c; docs: README, kiln.h)
 *   KILN_NUM_THREADS       num_threads        thread pool size, 1..1024; 0: unset or
 *                                             invalid, the online cores (pool.c)
 *   KILN_CACHE_DIR         cache_dir          the disk cache's directory; "off" turns it
 *   XDG_CACHE_HOME, HOME   xdg_cache_home,    off; else $XDG_CACHE_HOME/kiln, else
 *                          home               ~/.cache/kiln (disk.c; docs/jit.md)
 *   KILN_CACHE_SIZE_MB     cache_cap          the disk cache's cap in bytes (default 256
 *                                             MiB; an invalid value turns the cache off,
 *                                             saying why: disk.c)
 *   KILN_DUMP              dump               graph,plan,llvm,opt,asm: dump every compiled
 *   KILN_DUMP_DIR          dump_dir           program, to stderr or into files in the
 *                                             directory (program.c; docs/jit.md, "Dumps")
 *   KILN_TEST_PERTURB      test_perturb       tests only: flip the last bit of an op's
 *                                             results in new kernels, bypass the caches
 *                                             (emit.c, cache.c, program.c)
 *   KILN_TEST_RESIZE       test_resize        tests only: "verify": every plan made at new
 *                                             sizes from a kept one is compared with the
 *                                             plan made from scratch (an internal error
 *                                             if they differ); "off": none is (resize.c)
 *   KILN_TEST_VERIFY       test_verify        tests only: set and not "0": a graph a scope
 *                                             captured is verified again at scope end
 *                                             (capture checks each op as it is recorded;
 *                                             an internal error if the whole does not
 *                                             verify: lib/capture/scope.c)
 *   KILN_TEST_VECTOR_BITS  test_vector_bits   tests only: 256 or 128, compile for narrower
 *                                             vectors than the host's (host.c)
 *   KILN_VMATH_PORTABLE    vmath_portable     tests only: set and not "0": vmath's generic
 *                                             forms on AVX-512 hosts too (vmath.c)
 *
 * A program that sets one of these with setenv after the library has read them must call
 * ir_config_reload (internal: the tests do, and `kiln bench` after choosing its own disk
 * cache directory and thread count); a value read once by its user (the pool's size once
 * the pool runs, the host's vector width once described) keeps its first value.  Snapshots
 * replaced by a reload are kept, so a pointer from ir_config stays valid.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static ir_config first;
static _Atomic(const ir_config *) current;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void
copy(char *dst, size_t n, const char *name)
{
    const char *v = getenv(name);
    snprintf(dst, n, "%s", v ? v : "");
}

static void
read_env(ir_config *c)
{
    memset(c, 0, sizeof *c);
    const char *e = getenv("KILN_ABORT_ON_MISUSE");
    c->abort_on_misuse = e && e[0] == '1';

    e = getenv("KILN_NUM_THREADS");
    if (e && *e) {
        char *end;
        long v = strtol(e, &end, 10);
        if (*end == '\0' && v >= 1 && v <= 1024)
            c->num_threads = (int)v;
    }

    copy(c->cache_dir, sizeof c->cache_dir, "KILN_CACHE_DIR");
    copy(c->xdg_cache_home, sizeof c->xdg_cache_home, "XDG_CACHE_HOME");
    copy(c->home, sizeof c->home, "HOME");
    c->cache_cap = (uint64_t)256 << 20;
    copy(c->cache_size_mb, sizeof c->cache_size_mb, "KILN_CACHE_SIZE_MB");
    e = getenv("KILN_CACHE_SIZE_MB");
    if (e && *e) {
        char *end;
        errno = 0;
        unsigned long long mb = e[0] >= '0' && e[0] <= '9' ? strtoull(e, &end, 10) : 0;
        c->cache_cap = mb == 0 || errno || *end != '\0' || mb >= (1ull << 40) ? 0 : (uint64_t)mb << 20;
    }

    copy(c->dump, sizeof c->dump, "KILN_DUMP");
    copy(c->dump_dir, sizeof c->dump_dir, "KILN_DUMP_DIR");

    copy(c->test_perturb, sizeof c->test_perturb, "KILN_TEST_PERTURB");
    e = getenv("KILN_TEST_RESIZE");
    c->test_resize = e && !strcmp(e, "verify") ? 1 : e && !strcmp(e, "off") ? -1 : 0;
    e = getenv("KILN_TEST_VERIFY");
    c->test_verify = e && *e && strcmp(e, "0") != 0;
    e = getenv("KILN_TEST_VECTOR_BITS");
    if (e && (!strcmp(e, "256") || !strcmp(e, "128")))
        c->test_vector_bits = atoi(e);
    e = getenv("KILN_VMATH_PORTABLE");
    c->vmath_portable = e && *e && strcmp(e, "0") != 0;
}

static void
init(void)
{
    read_env(&first);
    atomic_store(&current, &first);
}

const ir_config *
ir_config_get(void)
{
    pthread_once(&once, init);
    return atomic_load(&current);
}

void
ir_config_reload(void)
{
    pthread_once(&once, init);
    ir_config *c = malloc(sizeof *c);
    if (!c)
        return;
    read_env(c);
    c->prev = atomic_load(&current); /* kept (and reachable): readers may hold it */
    atomic_store(&current, c);
}
