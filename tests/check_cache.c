/* check_cache.c — the caches: the one in-memory cache (jit_lru: hashed lookup, LRU by count
 * and bytes, single flight), and the persistent disk cache (disk.c) across processes.
 *
 * Every test uses a private directory (mkdtemp) through KILN_CACHE_DIR; ctest runs the
 * suite with KILN_CACHE_DIR=off, so nothing here touches the user's cache.  Results are
 * checked bit for bit against the reference interpreter (the graph is made of exact ops:
 * max, min, sub, mul), so code that came from a bad entry could not pass.  Processes are
 * this executable run again with --child / --race (posix_spawn of /proc/self/exe); the
 * threaded tests are the ones scripts/test.sh also runs under ThreadSanitizer. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jit.h"
#include "llvm.h" /* jit_engine_test_passes */
#include "oracle.h"
#include "randgraph.h"
#include "support.h"

extern char **environ;

/* The directory's counters (disk.c) */
#define STATS_NAME "kiln-stats"

/* Three kernels in fused mode: the row reduction with its consumer, the column reduction,
 * and nothing inexact. */
static const char graph_fmt[] =
    "graph cached(x: f32[%d,100], y: f32[100]) -> (r: f32[%d,1], o: f32[%d,100], c: f32[1,100]) {\n"
    "  r = reduce_max(x, axes=[1], keepdim=true)\n"
    "  d = sub(x, r)\n"
    "  o = mul(d, y)\n"
    "  c = reduce_min(x, axes=[0], keepdim=true)\n"
    "}\n";

static kiln_graph *
graph_rows(int rows)
{
    char text[sizeof graph_fmt + 64];
    snprintf(text, sizeof text, graph_fmt, rows, rows, rows);
    kiln_graph *g = NULL;
    if (kiln_graph_parse(text, strlen(text), &g) != KILN_OK)
        return NULL;
    return g;
}

/* Compile g (FUSED, default options), run it and compare every output bit for bit with
 * the interpreter's; NULL when all match, else a malloc'd report.  No Check assertions:
 * the child processes run it outside a test. */
static char *
compile_and_check(const kiln_graph *g, uint64_t seed)
{
    enum { MAXIO = 8 };
    void *in[MAXIO] = {0}, *got[MAXIO] = {0}, *want[MAXIO] = {0};
    size_t obytes[MAXIO] = {0};
    int nin = kiln_graph_num_inputs(g), nout = kiln_graph_num_outputs(g);
    char *rep = NULL;
    kiln_program *p = NULL;
    ts_rng r;
    ts_rng_seed(&r, seed);
    if (nin > MAXIO || nout > MAXIO)
        return strdup("too many inputs or outputs");
    for (int i = 0; i < nin; i++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_input(g, i, &vi);
        in[i] = malloc(vi.bytes + 1);
        if (in[i])
            ts_random_elements(&r, vi.dtype, in[i], vi.count, true);
    }
    for (int i = 0; i < nout; i++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_output(g, i, &vi);
        obytes[i] = vi.bytes;
        got[i] = malloc(vi.bytes + 1);
        want[i] = malloc(vi.bytes + 1);
        if (got[i])
            memset(got[i], 0xa5, vi.bytes);
    }
    if (kiln_program_compile(g, NULL, &p) || kiln_program_run(p, (const void *const *)in, got) ||
        kiln_graph_interpret(g, (const void *const *)in, want)) {
        rep = malloc(4200);
        if (rep)
            snprintf(rep, 4200, "compile or run failed: %s", kiln_errmsg());
    }
    for (int i = 0; i < nout && !rep; i++)
        if (memcmp(got[i], want[i], obytes[i]) != 0) {
            rep = malloc(64);
            if (rep)
                snprintf(rep, 64, "output %d differs from the interpreter's", i);
        }
    kiln_program_free(p);
    for (int i = 0; i < MAXIO; i++) {
        free(in[i]);
        free(got[i]);
        free(want[i]);
    }
    return rep;
}

/* Forget every compiled program and kernel of this process (as a new process would). */
static void
drop_memory_caches(void)
{
    jit_plan_cache_trim();
    jit_cache_trim();
}

static char *
make_dir(void)
{
    char *d = strdup("/tmp/kiln_cache_XXXXXX");
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(mkdtemp(d));
    return d;
}

static void
remove_dir(char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            if (unlink(p) != 0)
                rmdir(p); /* an empty directory put in an entry's place */
        }
        closedir(d);
    }
    rmdir(dir);
    free(dir);
}

/* The entry files (*.kobj) of dir: how many, and the path of the last one seen; with
 * `tmp`, the leftover temporary files instead. */
static int
count_files(const char *dir, const char *suffix, char *last, size_t n)
{
    int count = 0;
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name), s = strlen(suffix);
        bool match = suffix[0] == '.' && suffix[1] == 't'
                         ? strncmp(e->d_name, suffix, s) == 0
                         : l > s && strcmp(e->d_name + l - s, suffix) == 0;
        if (!match)
            continue;
        count++;
        if (last)
            snprintf(last, n, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    return count;
}

static void
use_dir(const char *dir)
{
    ck_assert_int_eq(setenv("KILN_CACHE_DIR", dir, 1), 0);
    ir_config_reload(); /* the library reads the environment once */
}

/* The end of a test that used dir as the disk cache: forget what was compiled, turn the disk
 * cache off again and remove dir (freed). */
static void
leave_dir(char *dir)
{
    drop_memory_caches();
    setenv("KILN_CACHE_DIR", "off", 1);
    ir_config_reload();
    remove_dir(dir);
}

static kiln_stats
stats(void)
{
    kiln_stats s = KILN_STATS_INIT;
    kiln_jit_stats(&s);
    return s;
}

/* ---- child processes ---------------------------------------------------------------------- */

/* --child DIR REPORT: compile the graph with DIR as the disk cache, check it, and write
 * "compiles hits misses rejected writes" to REPORT.  Exit 0 when the result is exact. */
static int
child(const char *dir, const char *report)
{
    setenv("KILN_CACHE_DIR", dir, 1);
    ir_config_reload();
    kiln_graph *g = graph_rows(64);
    if (!g)
        return 3;
    char *rep = compile_and_check(g, 7);
    kiln_graph_free(g);
    if (rep) {
        fprintf(stderr, "child: %s\n", rep);
        free(rep);
        return 4;
    }
    kiln_stats s = stats();
    FILE *f = fopen(report, "w");
    if (!f)
        return 5;
    fprintf(f, "%llu %llu %llu %llu %llu\n", (unsigned long long)s.kernel_compiles,
            (unsigned long long)s.disk_hits, (unsigned long long)s.disk_misses,
            (unsigned long long)s.disk_rejected, (unsigned long long)s.disk_writes);
    return fclose(f) == 0 ? 0 : 5;
}

/* --race DIR ITERS: over and over, clear the directory (every other round), forget the
 * in-memory caches, compile and check; another process does the same at the same time.
 * Exit 0 when every result was exact and no entry was ever rejected (a reader sees a
 * whole entry or none). */
static int
race(const char *dir, int iters)
{
    setenv("KILN_CACHE_DIR", dir, 1);
    ir_config_reload();
    kiln_graph *g = graph_rows(32);
    if (!g)
        return 3;
    for (int i = 0; i < iters; i++) {
        if (i % 2)
            kiln_cache_clear(NULL);
        drop_memory_caches();
        char *rep = compile_and_check(g, (uint64_t)i);
        if (rep) {
            fprintf(stderr, "race: %s\n", rep);
            free(rep);
            kiln_graph_free(g);
            return 4;
        }
    }
    kiln_graph_free(g);
    kiln_stats s = stats();
    if (s.disk_rejected || s.disk_write_errors) {
        fprintf(stderr, "race: %llu entries rejected, %llu writes failed\n",
                (unsigned long long)s.disk_rejected, (unsigned long long)s.disk_write_errors);
        return 6;
    }
    return 0;
}

static pid_t
spawn_child(const char *const *args)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    ck_assert(n > 0);
    self[n] = '\0';
    char *argv[8] = {self};
    for (int i = 0; args[i] && i < 6; i++)
        argv[i + 1] = (char *)args[i];
    pid_t pid;
    ck_assert_int_eq(posix_spawn(&pid, self, NULL, NULL, argv, environ), 0);
    return pid;
}

static int
wait_child(pid_t pid)
{
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

typedef struct report {
    unsigned long long compiles, hits, misses, rejected, writes;
} report;

static report
run_child(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s.report", dir);
    const char *args[] = {"--child", dir, path, NULL};
    ck_assert_int_eq(wait_child(spawn_child(args)), 0);
    report r;
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%llu %llu %llu %llu %llu", &r.compiles, &r.hits, &r.misses,
                            &r.rejected, &r.writes),
                     5);
    fclose(f);
    unlink(path);
    return r;
}

/* ---- the disk cache across processes ----------------------------------------------------- */

START_TEST(test_second_process_does_no_codegen)
{
    char *dir = make_dir();
    report a = run_child(dir);
    ck_assert_uint_ge(a.compiles, 2); /* the plan's kernels, compiled by LLVM ... */
    ck_assert_uint_eq(a.hits, 0);
    ck_assert_uint_eq(a.writes, 1); /* ... in one module, one entry */
    ck_assert_int_eq(count_files(dir, ".kobj", NULL, 0), 1);
    report b = run_child(dir);
    ck_assert_uint_eq(b.compiles, 0); /* no LLVM code generation at all */
    ck_assert_uint_eq(b.hits, 1);
    ck_assert_uint_eq(b.misses, 0);
    ck_assert_uint_eq(b.rejected, 0);
    ck_assert_uint_eq(b.writes, 0);
    /* kiln cache's figures: one entry, the counts of both processes */
    use_dir(dir);
    kiln_cache_info info = KILN_CACHE_INFO_INIT;
    ck_assert_int_eq(kiln_cache_info_get(&info), KILN_OK);
    ck_assert_int_eq(info.enabled, 1);
    ck_assert_str_eq(info.path, dir);
    ck_assert_uint_eq(info.entries, 1);
    ck_assert_uint_gt(info.bytes, 64);
    ck_assert_uint_eq(info.hits, 1);
    ck_assert_uint_eq(info.misses, 1);
    ck_assert_uint_eq(info.writes, 1);
    uint64_t removed;
    ck_assert_int_eq(kiln_cache_clear(&removed), KILN_OK);
    ck_assert_uint_eq(removed, 1);
    ck_assert_int_eq(kiln_cache_info_get(&info), KILN_OK);
    ck_assert_uint_eq(info.entries, 0);
    ck_assert_uint_eq(info.hits, 0);
    setenv("KILN_CACHE_DIR", "off", 1);
    ir_config_reload();
    remove_dir(dir);
}
END_TEST

/* Two processes (and two more) fill and clear the same keys at once: every result exact,
 * no entry ever rejected, no temporary file left, and what remains loads. */
START_TEST(test_processes_fill_same_key)
{
    char *dir = make_dir();
    const char *args[] = {"--race", dir, "12", NULL};
    pid_t p[4];
    for (int i = 0; i < 4; i++)
        p[i] = spawn_child(args);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(wait_child(p[i]), 0);
    ck_assert_int_eq(count_files(dir, ".tmp-", NULL, 0), 0);
    ck_assert_int_le(count_files(dir, ".kobj", NULL, 0), 1);
    /* fill it once more and load it in a fresh process */
    report a = run_child(dir);
    (void)a;
    report b = run_child(dir);
    ck_assert_uint_eq(b.compiles, 0);
    ck_assert_uint_eq(b.rejected, 0);
    setenv("KILN_CACHE_DIR", "off", 1);
    ir_config_reload();
    remove_dir(dir);
}
END_TEST

/* ---- damaged entries ------------------------------------------------------------------------ */

static unsigned char *
slurp(const char *path, size_t *n)
{
    char *p = ts_slurp(path, n);
    ck_assert_ptr_nonnull(p);
    return (unsigned char *)p;
}

static void
spit(const char *path, const unsigned char *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* The entry of the graph in dir (compiled into it first), damaged by `damage`; then a
 * compile must reject it, compile with LLVM, rewrite it, and the rewritten one must load. */
static void
check_damage(void (*damage)(const char *path), const char *what)
{
    char *dir = make_dir();
    use_dir(dir);
    kiln_graph *g = graph_rows(16);
    ck_assert_ptr_nonnull(g);
    drop_memory_caches();
    char *rep = compile_and_check(g, 1);
    ck_assert_msg(rep == NULL, "%s", rep);
    char path[4200];
    ck_assert_int_eq(count_files(dir, ".kobj", path, sizeof path), 1);
    damage(path);

    drop_memory_caches();
    kiln_stats s0 = stats();
    rep = compile_and_check(g, 2);
    ck_assert_msg(rep == NULL, "%s: %s", what, rep);
    kiln_stats s1 = stats();
    ck_assert_msg(s1.disk_rejected == s0.disk_rejected + 1, "%s: not rejected", what);
    ck_assert_uint_eq(s1.disk_hits, s0.disk_hits);
    ck_assert_uint_gt(s1.kernel_compiles, s0.kernel_compiles);
    ck_assert_msg(s1.disk_writes == s0.disk_writes + 1, "%s: not rewritten", what);

    drop_memory_caches();
    rep = compile_and_check(g, 3);
    ck_assert_msg(rep == NULL, "%s: %s", what, rep);
    kiln_stats s2 = stats();
    ck_assert_uint_eq(s2.disk_hits, s1.disk_hits + 1);
    ck_assert_uint_eq(s2.kernel_compiles, s1.kernel_compiles);
    ck_assert_uint_eq(s2.disk_rejected, s1.disk_rejected);
    kiln_graph_free(g);
    leave_dir(dir);
}

/* XOR byte `at` of the file (from the end when negative) with mask. */
static void
xor_byte(const char *path, long at, unsigned mask)
{
    size_t n;
    unsigned char *p = slurp(path, &n);
    p[at < 0 ? n - (size_t)-at : (size_t)at] ^= (unsigned char)mask;
    spit(path, p, n);
    free(p);
}

static void
flip_object_byte(const char *path)
{
    xor_byte(path, -40, 0x10);
}

static void
truncate_half(const char *path)
{
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(truncate(path, st.st_size / 2), 0);
}

static void
empty(const char *path)
{
    ck_assert_int_eq(truncate(path, 0), 0);
}

/* Another kiln version wrote it: the key differs, the content hash is right. */
static void
foreign_version(const char *path)
{
    size_t n;
    unsigned char *p = slurp(path, &n);
    const char *v = KILN_VERSION_STRING;
    size_t vl = strlen(v);
    unsigned char *at = NULL;
    for (size_t i = 64; i + vl <= n && !at; i++)
        if (memcmp(p + i, v, vl) == 0)
            at = p + i;
    ck_assert_msg(at != NULL, "the key holds no version string");
    at[vl - 1] = at[vl - 1] == '9' ? '8' : '9';
    jit_disk_digest(p + 64, n - 64, p + 32);
    spit(path, p, n);
    free(p);
}

/* Another entry format (header), content hash right. */
static void
foreign_format(const char *path)
{
    xor_byte(path, 8, 0x40);
}

/* Garbage of the right size with a valid-looking header but a wrong content hash. */
static void
garbage_object(const char *path)
{
    size_t n;
    unsigned char *p = slurp(path, &n);
    size_t klen = 0;
    for (int i = 7; i >= 0; i--)
        klen = klen << 8 | p[16 + i];
    for (size_t i = 64 + klen; i < n; i++)
        p[i] = 0xcc; /* int3 */
    spit(path, p, n);
    free(p);
}

/* The same garbage with its content hash made right (as a writer with a bug could):
 * LLJIT refuses the object, and it is counted, compiled anew and rewritten. */
static void
garbage_object_rehashed(const char *path)
{
    garbage_object(path);
    size_t n;
    unsigned char *p = slurp(path, &n);
    jit_disk_digest(p + 64, n - 64, p + 32);
    spit(path, p, n);
    free(p);
}

/* Not a file in the entry's place (issue 26, defect 5): a FIFO hung every compile in
 * open(2), a directory was a permanent silent miss.  Both are rejected, replaced by the
 * entry the compile writes, and that loads.  SIGALRM kills a hanging suite. */
static void
fifo(const char *path)
{
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
}

static void
directory(const char *path)
{
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(mkdir(path, 0700), 0);
}

START_TEST(test_not_a_file_entry)
{
    alarm(120);
    check_damage(fifo, "a FIFO in the entry's place");
    check_damage(directory, "an empty directory in the entry's place");
    alarm(0);
}
END_TEST

/* A FIFO in the counters' place: compiles and kiln cache neither hang nor replace it. */
START_TEST(test_fifo_stats)
{
    char *dir = make_dir();
    use_dir(dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, STATS_NAME);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    alarm(120);
    kiln_graph *g = graph_rows(16);
    drop_memory_caches();
    char *rep = compile_and_check(g, 1);
    ck_assert_msg(rep == NULL, "%s", rep);
    kiln_cache_info info = KILN_CACHE_INFO_INIT;
    ck_assert_int_eq(kiln_cache_info_get(&info), KILN_OK);
    ck_assert_int_eq(info.enabled, 1);
    ck_assert_uint_eq(info.entries, 1);
    ck_assert_uint_eq(info.writes, 0); /* no counters: not a file */
    alarm(0);
    struct stat st;
    ck_assert_int_eq(lstat(path, &st), 0);
    ck_assert(S_ISFIFO(st.st_mode));
    kiln_graph_free(g);
    leave_dir(dir);
}
END_TEST

/* Write text to dir/name. */
static void
put_file(const char *dir, const char *name, const char *text)
{
    char path[8400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    spit(path, (const unsigned char *)text, strlen(text));
}

/* 1 when dir/name exists, else 0. */
static int
has_file(const char *dir, const char *name)
{
    char path[8400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Does dir/name hold exactly text? */
static bool
file_is(const char *dir, const char *name, const char *text)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t n;
    char *p = ts_slurp(path, &n);
    bool same = p && n == strlen(text) && memcmp(p, text, n) == 0;
    free(p);
    return same;
}

/* KILN_CACHE_DIR at a folder of the user's (issue 26, defect 6): kiln kept its counters in
 * <dir>/stats and `kiln cache clear` deleted that file.  A directory kiln did not create
 * is refused unless it holds only kiln's files; kiln's own carries a CACHEDIR.TAG, its
 * counters are kiln-stats, and clear removes only kiln's files. */
START_TEST(test_foreign_dir_untouched)
{
    static const char mine[] = "the user's own stats\n";
    kiln_graph *g = graph_rows(16);
    /* a project folder: refused, nothing written or removed */
    char *dir = make_dir();
    put_file(dir, "stats", mine);
    put_file(dir, "notes.txt", mine);
    use_dir(dir);
    kiln_cache_info info = KILN_CACHE_INFO_INIT;
    ck_assert_int_eq(kiln_cache_info_get(&info), KILN_OK);
    ck_assert_int_eq(info.enabled, 0);
    ck_assert_msg(strstr(info.reason, "not kiln's cache"), "reason: %s", info.reason);
    drop_memory_caches();
    char *rep = compile_and_check(g, 1);
    ck_assert_msg(rep == NULL, "%s", rep);
    ck_assert_int_eq(kiln_cache_clear(NULL), KILN_ERR_INVALID_ARG);
    ts_assert_error(KILN_ERR_INVALID_ARG, "not kiln's cache");
    ck_assert_int_eq(count_files(dir, ".kobj", NULL, 0), 0);
    ck_assert_int_eq(has_file(dir, "CACHEDIR.TAG"), 0);
    ck_assert(file_is(dir, "stats", mine) && file_is(dir, "notes.txt", mine));
    remove_dir(dir);

    /* a folder with only a file named stats: taken and tagged, and that file kept */
    dir = make_dir();
    put_file(dir, "stats", mine);
    use_dir(dir);
    drop_memory_caches();
    rep = compile_and_check(g, 2);
    ck_assert_msg(rep == NULL, "%s", rep);
    ck_assert_int_eq(count_files(dir, ".kobj", NULL, 0), 1);
    ck_assert_int_eq(has_file(dir, "CACHEDIR.TAG"), 1);
    ck_assert_int_eq(has_file(dir, STATS_NAME), 1);
    ck_assert_int_eq(kiln_cache_info_get(&info), KILN_OK);
    ck_assert_int_eq(info.enabled, 1);
    ck_assert_uint_eq(info.writes, 1);
    uint64_t removed;
    ck_assert_int_eq(kiln_cache_clear(&removed), KILN_OK);
    ck_assert_uint_eq(removed, 1);
    ck_assert(file_is(dir, "stats", mine));
    ck_assert_int_eq(has_file(dir, "CACHEDIR.TAG"), 1);
    remove_dir(dir);

    /* a directory kiln creates is tagged */
    dir = make_dir();
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/new", dir);
    use_dir(sub);
    drop_memory_caches();
    rep = compile_and_check(g, 3);
    ck_assert_msg(rep == NULL, "%s", rep);
    ck_assert_int_eq(has_file(sub, "CACHEDIR.TAG"), 1);
    char *subdir = strdup(sub);
    remove_dir(subdir);
    remove_dir(dir);
    kiln_graph_free(g);
    drop_memory_caches();
    setenv("KILN_CACHE_DIR", "off", 1);
    ir_config_reload();
}
END_TEST

/* ---- failures said, not swallowed (issue 26, defect 7) ------------------------------------ */

/* --fsize DIR: compile two graphs with writes limited to 4 KiB (RLIMIT_FSIZE: every entry
 * write fails with EFBIG, also as root), each result exact.  Exit 0 when both compiled and
 * both writes failed. */
static int
fsize_child(const char *dir)
{
    setenv("KILN_CACHE_DIR", dir, 1);
    ir_config_reload();
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {4096, 4096};
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
        return 3;
    for (int rows = 1; rows <= 16; rows += 15) {
        drop_memory_caches();
        kiln_graph *g = graph_rows(rows);
        char *rep = g ? compile_and_check(g, 1) : strdup("parse");
        kiln_graph_free(g);
        if (rep) {
            fprintf(stderr, "fsize child: %s\n", rep);
            return 4;
        }
    }
    return stats().disk_write_errors == 2 && stats().disk_writes == 0 ? 0 : 5;
}

/* Every write failing (a full file system, a read-only mount, no permission) was silent:
 * the first one is said on stderr with its errno text, once per process. */
START_TEST(test_write_errors_said_once)
{
    char *dir = make_dir();
    char errpath[4200];
    snprintf(errpath, sizeof errpath, "%s.stderr", dir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    ck_assert(n > 0);
    self[n] = '\0';
    char *argv[] = {self, "--fsize", dir, NULL};
    pid_t pid;
    ck_assert_int_eq(posix_spawn(&pid, self, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    int code = wait_child(pid);
    size_t len;
    char *err = ts_slurp(errpath, &len);
    ck_assert_ptr_nonnull(err);
    ck_assert_msg(code == 0, "child exit %d; stderr:\n%s", code, err);
    const char *needle = "kiln: disk cache: cannot store compiled code in";
    char *first = strstr(err, needle);
    ck_assert_msg(first != NULL, "no warning; stderr:\n%s", err);
    ck_assert_msg(strstr(first + 1, needle) == NULL, "said twice:\n%s", err);
    ck_assert_msg(strstr(err, dir) && strstr(err, strerror(EFBIG)), "stderr:\n%s", err);
    free(err);
    unlink(errpath);
    remove_dir(dir);
}
END_TEST

/* clear and trim said "removed 0 entries" and succeeded when nothing was removed: a file
 * they cannot remove (here a directory with a file in an entry's place) is an error that
 * names it and says why, after the others are removed. */
START_TEST(test_clear_reports_failures)
{
    char *dir = make_dir();
    use_dir(dir);
    kiln_graph *g = graph_rows(16);
    drop_memory_caches();
    char *rep = compile_and_check(g, 1);
    ck_assert_msg(rep == NULL, "%s", rep);
    char blocked[4200];
    snprintf(blocked, sizeof blocked, "%s/0123456789abcdef0123456789abcdef.kobj", dir);
    ck_assert_int_eq(mkdir(blocked, 0700), 0);
    put_file(blocked, "inside", "x");
    uint64_t removed = 99;
    ck_assert_int_eq(kiln_cache_clear(&removed), KILN_ERR_IO);
    ts_assert_error(KILN_ERR_IO, "kiln_cache_clear: cannot remove 1 file (removed 1 entries)");
    ts_assert_error(KILN_ERR_IO, "0123456789abcdef0123456789abcdef.kobj");
    ts_assert_error(KILN_ERR_IO, strerror(ENOTEMPTY));
    ck_assert_uint_eq(removed, 1);
    ck_assert_int_eq(count_files(dir, ".kobj", NULL, 0), 1); /* the directory */
    char inside[4300];
    snprintf(inside, sizeof inside, "%s/inside", blocked);
    unlink(inside);
    ck_assert_int_eq(kiln_cache_clear(&removed), KILN_OK);
    ck_assert_int_eq(count_files(dir, ".kobj", NULL, 0), 0);
    kiln_graph_free(g);
    leave_dir(dir);
}
END_TEST

/* A dangling KILN_CACHE_DIR: the compile said "off", kiln cache "on: not created yet";
 * both say off, and why. */
START_TEST(test_dangling_dir)
{
    char *dir = make_dir();
    char link[4200], deep[4200];
    snprintf(link, sizeof link, "%s/link", dir);
    snprintf(deep, sizeof deep, "%s/no/such/parent", dir);
    ck_assert_int_eq(symlink("nothing-here", link), 0);
    const char *const paths[2] = {link, deep};
    const char *const why[2] = {"symbolic link to nothing", "cannot be created"};
    kiln_graph *g = graph_rows(16);
    for (int k = 0; k < 2; k++) {
        use_dir(paths[k]);
        kiln_cache_info info = KILN_CACHE_INFO_INIT;
        ck_assert_int_eq(kiln_cache_info_get(&info), KILN_OK);
        ck_assert_msg(info.enabled == 0 && strstr(info.reason, why[k]), "%s: %d %s", paths[k],
                      info.enabled, info.reason);
        drop_memory_caches();
        kiln_stats s0 = stats();
        char *rep = compile_and_check(g, 1);
        ck_assert_msg(rep == NULL, "%s", rep);
        ck_assert_uint_eq(stats().disk_writes, s0.disk_writes);
        ck_assert_uint_eq(stats().disk_misses, s0.disk_misses);
    }
    unlink(link);
    kiln_graph_free(g);
    leave_dir(dir);
}
END_TEST

/* KILN_CACHE_SIZE_MB=0, -1 or abc silently meant 256: refused, the cache off, saying why. */
START_TEST(test_bad_size_cap)
{
    char *dir = make_dir();
    use_dir(dir);
    kiln_graph *g = graph_rows(16);
    static const char *const bad[] = {"0", "-1", "abc", "12x", " 5", "1099511627776"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        setenv("KILN_CACHE_SIZE_MB", bad[k], 1);
        ir_config_reload();
        kiln_cache_info info = KILN_CACHE_INFO_INIT;
        ck_assert_int_eq(kiln_cache_info_get(&info), KILN_OK);
        ck_assert_msg(info.enabled == 0 && strstr(info.reason, "KILN_CACHE_SIZE_MB") &&
                          strstr(info.reason, bad[k]),
                      "KILN_CACHE_SIZE_MB=%s: %d %s", bad[k], info.enabled, info.reason);
        ck_assert_int_eq(kiln_cache_trim(0, NULL), KILN_ERR_INVALID_ARG);
        drop_memory_caches();
        char *rep = compile_and_check(g, 1);
        ck_assert_msg(rep == NULL, "%s", rep);
        ck_assert_int_eq(count_files(dir, ".kobj", NULL, 0), 0);
    }
    setenv("KILN_CACHE_SIZE_MB", "", 1); /* empty: the default */
    ir_config_reload();
    kiln_cache_info info = KILN_CACHE_INFO_INIT;
    ck_assert_int_eq(kiln_cache_info_get(&info), KILN_OK);
    ck_assert_int_eq(info.enabled, 1);
    ck_assert_uint_eq(info.max_bytes, (uint64_t)256 << 20);
    unsetenv("KILN_CACHE_SIZE_MB");
    ir_config_reload();
    kiln_graph_free(g);
    leave_dir(dir);
}
END_TEST

/* Temporary files of writers that died sat outside the cap and clear for an hour: counted,
 * and clear removes them (not those of a write in progress: this process's). */
START_TEST(test_stale_temp_files)
{
    char *dir = make_dir();
    use_dir(dir);
    static const char junk[1000] = {0};
    char dead[4200], live[4200];
    /* pid 2^30 + 7 exceeds any pid_max: its writer is gone */
    snprintf(dead, sizeof dead, "%s/.tmp-%ld-0-0", dir, (1L << 30) + 7);
    snprintf(live, sizeof live, "%s/.tmp-%ld-999-0", dir, (long)getpid());
    spit(dead, (const unsigned char *)junk, sizeof junk);
    spit(live, (const unsigned char *)junk, 10);
    struct timespec old[2] = {{time(NULL) - 60, 0}, {time(NULL) - 60, 0}};
    ck_assert_int_eq(utimensat(AT_FDCWD, dead, old, 0), 0);
    ck_assert_int_eq(utimensat(AT_FDCWD, live, old, 0), 0);
    kiln_cache_info info = KILN_CACHE_INFO_INIT;
    ck_assert_int_eq(kiln_cache_info_get(&info), KILN_OK);
    ck_assert_uint_eq(info.temp_files, 2);
    ck_assert_uint_eq(info.temp_bytes, sizeof junk + 10);
    uint64_t removed;
    ck_assert_int_eq(kiln_cache_clear(&removed), KILN_OK);
    ck_assert_uint_eq(removed, 0);
    ck_assert_int_eq(kiln_cache_info_get(&info), KILN_OK);
    ck_assert_uint_eq(info.temp_files, 1);
    ck_assert_int_eq(access(dead, F_OK), -1);
    ck_assert_int_eq(access(live, F_OK), 0);
    /* the cap counts them: trimming to 1 byte leaves the live one and nothing else */
    ck_assert_int_eq(kiln_cache_trim(1, &removed), KILN_OK);
    ck_assert_int_eq(access(live, F_OK), 0);
    setenv("KILN_CACHE_DIR", "off", 1);
    ir_config_reload();
    remove_dir(dir);
}
END_TEST

/* ---- the size, kept as a running total (issue 26, defect 8) -------------------------------- */

static uint64_t
disk_scans(void)
{
    jit_disk_stats c;
    jit_disk_counters(&c);
    return c.scans;
}

/* A graph whose kernel is distinct for each k (k + 1 multiplications: a constant's value
 * alone would not do, it is a run-time argument of the kernel). */
static kiln_graph *
graph_const(int k)
{
    char text[4096];
    int n = snprintf(text, sizeof text,
                     "graph k(x: f32[64]) -> (y: f32[64]) {\n  c = full(value=%d.5) : f32[64]\n"
                     "  y0 = mul(x, c)\n", k);
    for (int i = 1; i <= k; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, "  y%d = mul(y%d, c)\n", i, i - 1);
    snprintf(text + n, sizeof text - (size_t)n, "  y = neg(y%d)\n}\n", k);
    return ts_parse(text);
}

/* Defect 9 of issue 26: a step-dependent scalar (a learning rate, a temperature, a position)
 * captured as a constant.  1,000 graphs differing only in a `full` value, an arange's start
 * and a pad's fill compile each kernel once and write one disk entry, and every one of them
 * computes its own values (bit for bit against the interpreter: the ops are exact). */
static kiln_graph *
graph_scalar(int k)
{
    char text[1024];
    snprintf(text, sizeof text,
             "graph s(x: f32[40], i: i32[12]) -> (y: f32[40], a: i32[12], p: f32[44]) {\n"
             "  c = full(value=%.17g) : f32[]\n"
             "  m = mul(x, c)\n"
             "  y = sub(m, c)\n"
             "  r = arange(start=%d, delta=%d) : i32[12]\n"
             "  a = add(r, i)\n"
             "  p = pad(x, low=[3], high=[1], value=%.17g)\n"
             "}\n",
             (double)(float)(0.37 * k - 50), 1000 * k - 7, k % 5 - 2, (double)(float)(1.0 / (k + 1)));
    return ts_parse(text);
}

START_TEST(test_scalar_arguments)
{
    char *dir = make_dir();
    use_dir(dir);
    kiln_graph *g = graph_scalar(0);
    drop_memory_caches();
    kiln_stats s0 = stats();
    char *rep = compile_and_check(g, 1);
    ck_assert_msg(rep == NULL, "%s", rep);
    kiln_graph_free(g);
    kiln_stats s1 = stats();
    uint64_t kernels = s1.kernel_compiles - s0.kernel_compiles;
    ck_assert_uint_ge(kernels, 1);
    ck_assert_uint_eq(s1.disk_writes - s0.disk_writes, 1);
    for (int k = 1; k < 1000; k++) {
        g = graph_scalar(k);
        rep = compile_and_check(g, (uint64_t)k);
        ck_assert_msg(rep == NULL, "value set %d: %s", k, rep);
        kiln_graph_free(g);
    }
    kiln_stats s2 = stats();
    ck_assert_uint_eq(s2.kernel_compiles, s1.kernel_compiles);
    ck_assert_uint_eq(s2.disk_writes, s1.disk_writes);
    ck_assert_int_eq(count_files(dir, ".kobj", NULL, 0), 1);
    leave_dir(dir);
}
END_TEST

/* ---- KILN_TIERED: a quick first tier, the full code from the background thread ---------- */

/* Every kind of kernel: a packed matmul with a vector-math epilogue, a skinny one, a row
 * reduction (softmax) and a column one, elementwise vector math (all outputs f32). */
static const char tiered_graph[] =
    "graph t(x: f32[48,96], w: f32[96,80], b: f32[80], v: f32[1,96]) -> "
    "(y: f32[48,80], s: f32[48,96], c: f32[1,96], e: f32[48,96], k: f32[1,80]) {\n"
    "  h = matmul(x, w)\n"
    "  z = add(h, b)\n"
    "  y = tanh(z)\n"
    "  m = reduce_max(x, axes=[1], keepdim=true)\n"
    "  d = sub(x, m)\n"
    "  ex = exp(d)\n"
    "  sm = reduce_sum(ex, axes=[1], keepdim=true)\n"
    "  s = div(ex, sm)\n"
    "  c = reduce_sum(x, axes=[0], keepdim=true)\n"
    "  e = log1p(ex)\n"
    "  k0 = matmul(v, w)\n"
    "  k = sigmoid(k0)\n"
    "}\n";

typedef struct tiered_io {
    const kiln_graph *g;
    kiln_program *p;
    void *in[4], *out[5], *want[5];
    size_t bytes[5];
    int nout;
    _Atomic bool stop;
    _Atomic int runs, bad;
} tiered_io;

static void
tiered_io_init(tiered_io *t, const kiln_graph *g)
{
    memset(t, 0, sizeof *t);
    t->g = g;
    ts_rng r;
    ts_rng_seed(&r, 77);
    for (int i = 0; i < kiln_graph_num_inputs(g); i++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_input(g, i, &vi);
        t->in[i] = malloc(vi.bytes);
        ck_assert_ptr_nonnull(t->in[i]);
        ts_random_elements(&r, vi.dtype, t->in[i], vi.count, true);
    }
    t->nout = kiln_graph_num_outputs(g);
    for (int i = 0; i < t->nout; i++) {
        kiln_value_info vi = KILN_VALUE_INFO_INIT;
        kiln_graph_output(g, i, &vi);
        t->bytes[i] = vi.bytes;
        t->out[i] = malloc(vi.bytes);
        t->want[i] = malloc(vi.bytes);
        ck_assert(t->out[i] && t->want[i]);
    }
}

static void
tiered_io_free(tiered_io *t)
{
    for (int i = 0; i < 4; i++)
        free(t->in[i]);
    for (int i = 0; i < 5; i++) {
        free(t->out[i]);
        free(t->want[i]);
    }
}

/* Run t->p into t->out; the first output that differs from t->want, or -1.  Bit for bit,
 * but a NaN is any NaN (payloads are not specified, docs/semantics.md: the two code
 * generators order an add's operands differently, and x86 returns the first NaN's). */
static int
tiered_run(tiered_io *t, void **out)
{
    if (kiln_program_run(t->p, (const void *const *)t->in, out) != KILN_OK)
        return 99;
    for (int i = 0; i < t->nout; i++)
        for (size_t e = 0; e < t->bytes[i] / sizeof(float); e++) {
            float a = ((const float *)out[i])[e], b = ((const float *)t->want[i])[e];
            if (isnan(a) ? !isnan(b) : memcmp(&a, &b, sizeof a) != 0)
                return i;
        }
    return -1;
}

/* Runs the program over and over on another thread while its code changes under it. */
static void *
tiered_runner(void *arg)
{
    tiered_io *t = arg;
    void *out[5] = {0};
    for (int i = 0; i < t->nout; i++)
        out[i] = malloc(t->bytes[i]);
    while (!atomic_load(&t->stop)) {
        if (tiered_run(t, out) >= 0)
            atomic_fetch_add(&t->bad, 1);
        atomic_fetch_add(&t->runs, 1);
    }
    for (int i = 0; i < t->nout; i++)
        free(out[i]);
    return NULL;
}

/* The first tier's results are the full code's, bit for bit but for NaN payloads (finite
 * inputs, so that few results are NaN; the full code compiled apart, past the caches, is
 * the oracle; the interpreter checks it elsewhere), before,
 * while and after the full code replaces it under a program running on another thread;
 * only the full code is written to disk, and a new process's compile loads it. */
START_TEST(test_tiered)
{
    char *dir = make_dir();
    use_dir(dir);
    drop_memory_caches();
    kiln_graph *g = ts_parse(tiered_graph);
    ck_assert_ptr_nonnull(g);
    tiered_io t;
    tiered_io_init(&t, g);

    /* the oracle: full code, compiled past the caches */
    kiln_options o = KILN_OPTIONS_INIT;
    o.flags = KILN_NO_CACHE;
    kiln_program *full = NULL;
    ck_assert_int_eq(kiln_program_compile(g, &o, &full), KILN_OK);
    ck_assert_int_eq(kiln_program_run(full, (const void *const *)t.in, t.want), KILN_OK);
    kiln_program_free(full);

    /* the first tier, for sure: the background thread holds its job */
    jit_background_hold(true);
    kiln_stats s0 = stats();
    o.flags = KILN_TIERED;
    ck_assert_int_eq(kiln_program_compile(g, &o, &t.p), KILN_OK);
    kiln_stats s1 = stats();
    uint64_t kernels = s1.kernel_compiles - s0.kernel_compiles;
    ck_assert_uint_ge(kernels, 4);
    ck_assert_uint_eq(s1.kernel_tierups, s0.kernel_tierups);
    ck_assert_uint_eq(s1.disk_writes, s0.disk_writes); /* the first tier is never written */
    size_t finite = 0;
    for (int i = 0; i < t.nout; i++)
        for (size_t e = 0; e < t.bytes[i] / sizeof(float); e++)
            finite += isfinite(((const float *)t.want[i])[e]);
    ck_assert_uint_gt(finite, 9000); /* of 9,056 */
    int bad = tiered_run(&t, t.out);
    ck_assert_msg(bad < 0, "first tier: output %d differs from the full code's", bad);

    /* the full code arrives while another thread runs the program */
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, tiered_runner, &t), 0);
    while (atomic_load(&t.runs) < 3)
        sched_yield();
    jit_background_hold(false);
    kiln_jit_sync();
    int before = atomic_load(&t.runs);
    while (atomic_load(&t.runs) < before + 3)
        sched_yield();
    atomic_store(&t.stop, true);
    pthread_join(th, NULL);
    int wrong = atomic_load(&t.bad);
    ck_assert_msg(wrong == 0, "%d runs differed while the code changed", wrong);
    kiln_stats s2 = stats();
    ck_assert_uint_eq(s2.kernel_tierups - s1.kernel_tierups, kernels);
    ck_assert_uint_eq(s2.kernel_compiles, s1.kernel_compiles);
    ck_assert_uint_eq(s2.disk_writes - s1.disk_writes, 1);
    bad = tiered_run(&t, t.out);
    ck_assert_msg(bad < 0, "full code: output %d differs", bad);
    kiln_program_free(t.p);

    /* as a new process: the disk entry holds the full code (no LLVM code generation) */
    drop_memory_caches();
    ck_assert_int_eq(kiln_program_compile(g, NULL, &t.p), KILN_OK);
    kiln_stats s3 = stats();
    ck_assert_uint_eq(s3.kernel_compiles, s2.kernel_compiles);
    ck_assert_uint_eq(s3.disk_hits - s2.disk_hits, 1);
    bad = tiered_run(&t, t.out);
    ck_assert_msg(bad < 0, "from disk: output %d differs", bad);
    kiln_program_free(t.p);

    /* a process that exits while the full code is being made exits cleanly */
    const char *args[] = {"--tiered-exit", dir, NULL};
    ck_assert_int_eq(wait_child(spawn_child(args)), 0);

    tiered_io_free(&t);
    kiln_graph_free(g);
    leave_dir(dir);
}
END_TEST

/* A first tier that fails (a pipeline LLVM cannot parse, through the test hook) fails the
 * compile on the caller's thread with the error its modules' pool tasks made (on the pool's
 * threads), leaks nothing, and leaves no kernel behind: the same compile works once the
 * pipeline is back. */
START_TEST(test_tiered_error)
{
    char *dir = make_dir();
    use_dir(dir);
    drop_memory_caches();
    kiln_graph *g = ts_parse(tiered_graph);
    ck_assert_ptr_nonnull(g);
    kiln_options o = KILN_OPTIONS_INIT;
    o.flags = KILN_TIERED;
    kiln_program *p = NULL;
    /* which thread compiles which module is the pool's choice, and the caller's own failed
     * module leaves the right message on its thread: a message lost on the way from a
     * worker shows only when the worker took every module (with the hand-over removed, in
     * about one try in 40 here: 2 ms a try, so 48 tries) */
    jit_engine_test_passes("no-such-pass");
    for (int i = 0; i < 48; i++) {
        kiln_clear_error();
        kiln_status st = kiln_program_compile(g, &o, &p);
        ck_assert_int_eq(st, KILN_ERR_COMPILE);
        ck_assert_ptr_null(p);
        ck_assert_msg(strstr(kiln_errmsg(), "compilation failed: optimisation:") != NULL,
                      "try %d: %s", i, kiln_errmsg());
    }
    jit_engine_test_passes(NULL);
    kiln_stats s0 = stats();
    ck_assert_int_eq(kiln_program_compile(g, &o, &p), KILN_OK);
    kiln_stats s1 = stats();
    ck_assert_uint_ge(s1.kernel_compiles - s0.kernel_compiles, 4);
    kiln_program_free(p);
    kiln_jit_sync();
    kiln_graph_free(g);
    leave_dir(dir);
}
END_TEST

/* --tiered-exit DIR: compile a new graph with KILN_TIERED, run it once, and return from
 * main at once, the background thread busy (or with jobs still queued). */
static int
tiered_exit(const char *dir)
{
    setenv("KILN_CACHE_DIR", dir, 1);
    ir_config_reload();
    kiln_options o = KILN_OPTIONS_INIT;
    o.flags = KILN_TIERED;
    for (int k = 0; k < 3; k++) {
        char text[512];
        snprintf(text, sizeof text, /* not in the disk cache: a kernel per k */
                 "graph e(x: f32[64]) -> (y: f32[64]) {\n  a = exp(x)\n  b = tanh(a)\n"
                 "  c = full(value=%d) : f32[]\n  y = %s(b, c)\n}\n",
                 k, k == 0 ? "add" : k == 1 ? "mul" : "sub");
        kiln_graph *g = NULL;
        kiln_program *p = NULL;
        if (kiln_graph_parse(text, strlen(text), &g) != KILN_OK ||
            kiln_program_compile(g, &o, &p) != KILN_OK) {
            fprintf(stderr, "tiered-exit: %s\n", kiln_errmsg());
            return 3;
        }
        float x[64] = {0}, y[64];
        const void *in[] = {x};
        void *out[] = {y};
        if (kiln_program_run(p, in, out) != KILN_OK)
            return 4;
        kiln_program_free(p);
        kiln_graph_free(g);
    }
    return 0;
}

/* Every write rescanned the whole directory to trim it: ~95 ms a write at 45,000 entries.
 * Writes below the cap scan it once per process (the first), and the cap still holds. */
START_TEST(test_running_size)
{
    char *dir = make_dir();
    use_dir(dir);
    uint64_t s0 = disk_scans();
    kiln_stats w0 = stats();
    for (int k = 0; k < 12; k++) {
        kiln_graph *g = graph_const(k);
        drop_memory_caches();
        char *rep = compile_and_check(g, 1);
        ck_assert_msg(rep == NULL, "%s", rep);
        kiln_graph_free(g);
    }
    ck_assert_uint_eq(stats().disk_writes - w0.disk_writes, 12);
    ck_assert_int_eq(count_files(dir, ".kobj", NULL, 0), 12);
    ck_assert_uint_le(disk_scans() - s0, 1);
    remove_dir(dir);

    /* a directory over the cap (1 MiB) when a write comes: trimmed, oldest first, to 7/8 */
    dir = make_dir();
    use_dir(dir);
    setenv("KILN_CACHE_SIZE_MB", "1", 1);
    ir_config_reload();
    static unsigned char junk[400 << 10];
    for (int k = 0; k < 3; k++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%032x.kobj", dir, k);
        spit(path, junk, sizeof junk);
        struct timespec old[2] = {{1000000 + k, 0}, {1000000 + k, 0}};
        ck_assert_int_eq(utimensat(AT_FDCWD, path, old, 0), 0);
    }
    kiln_graph *g = graph_const(99);
    drop_memory_caches();
    char *rep = compile_and_check(g, 1);
    ck_assert_msg(rep == NULL, "%s", rep);
    kiln_cache_info info = KILN_CACHE_INFO_INIT;
    ck_assert_int_eq(kiln_cache_info_get(&info), KILN_OK);
    ck_assert_uint_le(info.bytes, (uint64_t)7 << 17);
    ck_assert_uint_eq(info.entries, 3); /* the oldest junk went */
    char oldest[4200];
    snprintf(oldest, sizeof oldest, "%s/%032x.kobj", dir, 0);
    ck_assert_int_eq(access(oldest, F_OK), -1);
    unsetenv("KILN_CACHE_SIZE_MB");
    ir_config_reload();
    kiln_graph_free(g);
    leave_dir(dir);
}
END_TEST

START_TEST(test_corrupt_entry)
{
    check_damage(flip_object_byte, "corrupt");
}
END_TEST

START_TEST(test_truncated_entry)
{
    check_damage(truncate_half, "truncated");
    check_damage(empty, "empty");
}
END_TEST

START_TEST(test_foreign_version_entry)
{
    check_damage(foreign_version, "foreign kiln version");
    check_damage(foreign_format, "foreign entry format");
    check_damage(garbage_object, "garbage object");
    check_damage(garbage_object_rehashed, "garbage object, hash right");
}
END_TEST

/* ---- the directory's trust --------------------------------------------------------------- */

static void
check_refused(mode_t mode, const char *needle, bool other_owner)
{
    char *dir = make_dir();
    ck_assert_int_eq(chmod(dir, mode), 0);
    if (other_owner)
        ck_assert_int_eq(chown(dir, 65534, 65534), 0);
    use_dir(dir);
    kiln_cache_info info = KILN_CACHE_INFO_INIT;
    ck_assert_int_eq(kiln_cache_info_get(&info), KILN_OK);
    ck_assert_int_eq(info.enabled, 0);
    ck_assert_msg(strstr(info.reason, needle) && strstr(info.reason, dir),
                  "reason \"%s\" lacks \"%s\"", info.reason, needle);
    kiln_graph *g = graph_rows(8);
    drop_memory_caches();
    kiln_stats s0 = stats();
    char *rep = compile_and_check(g, 4); /* the compile itself succeeds */
    ck_assert_msg(rep == NULL, "%s", rep);
    kiln_stats s1 = stats();
    ck_assert_uint_gt(s1.kernel_compiles, s0.kernel_compiles);
    ck_assert_uint_eq(s1.disk_writes, s0.disk_writes);
    ck_assert_uint_eq(s1.disk_misses, s0.disk_misses); /* not even looked at */
    ck_assert_int_eq(count_files(dir, ".kobj", NULL, 0), 0);
    ck_assert_int_eq(kiln_cache_clear(NULL), KILN_ERR_INVALID_ARG);
    ts_assert_error(KILN_ERR_INVALID_ARG, needle);
    kiln_graph_free(g);
    leave_dir(dir);
}

START_TEST(test_group_writable_dir_refused)
{
    check_refused(0770, "writable by group or others", false);
    check_refused(0703, "writable by group or others", false);
    if (geteuid() == 0)
        check_refused(0700, "owned by another user", true);
}
END_TEST

START_TEST(test_off_and_option)
{
    char *dir = make_dir();
    use_dir(dir);
    kiln_graph *g = graph_rows(8);
    kiln_options o = KILN_OPTIONS_INIT;
    o.flags = KILN_NO_DISK_CACHE;
    kiln_program *p = NULL;
    drop_memory_caches();
    kiln_stats s0 = stats();
    ck_assert_int_eq(kiln_program_compile(g, &o, &p), KILN_OK);
    kiln_program_free(p);
    kiln_stats s1 = stats();
    ck_assert_uint_eq(s1.disk_misses + s1.disk_hits, s0.disk_misses + s0.disk_hits);
    ck_assert_int_eq(count_files(dir, ".kobj", NULL, 0), 0);
    setenv("KILN_CACHE_DIR", "off", 1);
    ir_config_reload();
    kiln_cache_info info = KILN_CACHE_INFO_INIT;
    ck_assert_int_eq(kiln_cache_info_get(&info), KILN_OK);
    ck_assert_int_eq(info.enabled, 0);
    ck_assert_str_eq(info.path, "off");
    drop_memory_caches();
    ck_assert_int_eq(kiln_program_compile(g, NULL, &p), KILN_OK);
    kiln_program_free(p);
    ck_assert_int_eq(count_files(dir, ".kobj", NULL, 0), 0);
    kiln_graph_free(g);
    drop_memory_caches();
    remove_dir(dir);
}
END_TEST

/* Trimming goes by least recent use: the entry loaded last survives. */
START_TEST(test_trim_lru)
{
    char *dir = make_dir();
    use_dir(dir);
    drop_memory_caches();
    for (int rows = 1; rows <= 3; rows++) { /* 1 row: other broadcast patterns, other keys */
        kiln_graph *g = graph_rows(rows == 1 ? 1 : rows * 8);
        char *rep = compile_and_check(g, 5);
        ck_assert_msg(rep == NULL, "%s", rep);
        kiln_graph_free(g);
    }
    int n = count_files(dir, ".kobj", NULL, 0);
    ck_assert_int_ge(n, 2);
    /* age every entry, then use the first graph's again */
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct timespec old[2] = {{1000000, 0}, {1000000, 0}};
        utimensat(AT_FDCWD, p, old, 0);
    }
    closedir(d);
    drop_memory_caches();
    kiln_graph *g = graph_rows(1);
    kiln_stats s0 = stats();
    char *rep = compile_and_check(g, 6);
    ck_assert_msg(rep == NULL, "%s", rep);
    ck_assert_uint_eq(stats().disk_hits, s0.disk_hits + 1);
    uint64_t removed;
    ck_assert_int_eq(kiln_cache_trim(1, &removed), KILN_OK); /* keep at most 1 byte: none */
    ck_assert_uint_eq(removed, (uint64_t)n);
    ck_assert_int_eq(count_files(dir, ".kobj", NULL, 0), 0);
    /* again, with room for exactly the newest */
    drop_memory_caches();
    for (int rows = 1; rows <= 3; rows++) {
        kiln_graph *h = graph_rows(rows == 1 ? 1 : rows * 8);
        free(compile_and_check(h, 5));
        kiln_graph_free(h);
    }
    char path[4200];
    d = opendir(dir);
    while ((e = readdir(d)) != NULL) {
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct timespec old[2] = {{1000000, 0}, {1000000, 0}};
        utimensat(AT_FDCWD, path, old, 0);
    }
    closedir(d);
    drop_memory_caches();
    free(compile_and_check(g, 6)); /* touches the first graph's entry */
    kiln_cache_info info = KILN_CACHE_INFO_INIT;
    ck_assert_int_eq(kiln_cache_info_get(&info), KILN_OK);
    uint64_t keep = 0;
    d = opendir(dir);
    while ((e = readdir(d)) != NULL) {
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (strstr(e->d_name, ".kobj") && stat(path, &st) == 0 && st.st_mtime > 1000000)
            keep = (uint64_t)st.st_size;
    }
    closedir(d);
    ck_assert_uint_gt(keep, 0);
    ck_assert_int_eq(kiln_cache_trim(keep, &removed), KILN_OK);
    ck_assert_uint_eq(removed, (uint64_t)n - 1);
    drop_memory_caches();
    s0 = stats();
    free(compile_and_check(g, 7));
    ck_assert_uint_eq(stats().disk_hits, s0.disk_hits + 1); /* the survivor is that one */
    kiln_graph_free(g);
    leave_dir(dir);
}
END_TEST

/* ---- single flight in one process (also under TSan) -------------------------------------- */

#define NTHREADS 4

typedef struct flight {
    pthread_barrier_t *start;
    int rows;
    char *rep;
} flight;

static void *
compile_thread(void *arg)
{
    flight *f = arg;
    kiln_graph *g = graph_rows(f->rows);
    pthread_barrier_wait(f->start);
    f->rep = g ? compile_and_check(g, 9) : strdup("parse failed");
    kiln_graph_free(g);
    return NULL;
}

/* Threads compile graphs at the same time, each graph with `rows(t)` rows; returns the
 * kernels LLVM compiled meanwhile. */
static uint64_t
race_threads(int (*rows)(int t))
{
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, NTHREADS);
    pthread_t th[NTHREADS];
    flight f[NTHREADS];
    drop_memory_caches();
    kiln_stats s0 = stats();
    for (int t = 0; t < NTHREADS; t++) {
        f[t] = (flight){&start, rows(t), NULL};
        ck_assert_int_eq(pthread_create(&th[t], NULL, compile_thread, &f[t]), 0);
    }
    for (int t = 0; t < NTHREADS; t++) {
        pthread_join(th[t], NULL);
        ck_assert_msg(f[t].rep == NULL, "thread %d: %s", t, f[t].rep);
    }
    pthread_barrier_destroy(&start);
    drop_memory_caches();
    return stats().kernel_compiles - s0.kernel_compiles;
}

static int
same_rows(int t)
{
    (void)t;
    return 40;
}

static int
other_rows(int t)
{
    return 40 + 8 * t; /* other plans, the same size-free kernels */
}

START_TEST(test_single_flight_threads)
{
    setenv("KILN_CACHE_DIR", "off", 1);
    ir_config_reload();
    /* the kernels one compile makes */
    drop_memory_caches();
    kiln_stats s0 = stats();
    kiln_graph *g = graph_rows(40);
    free(compile_and_check(g, 1));
    kiln_graph_free(g);
    uint64_t k = stats().kernel_compiles - s0.kernel_compiles;
    ck_assert_uint_ge(k, 2);
    for (int round = 0; round < 3; round++) {
        ck_assert_uint_eq(race_threads(same_rows), k);  /* one plan, compiled once */
        ck_assert_uint_eq(race_threads(other_rows), k); /* each kernel compiled once */
    }
}
END_TEST

/* ---- the cache itself ------------------------------------------------------------------------ */

static _Atomic int freed_values;

static bool
int_equal(const void *a, const void *b)
{
    return *(const int *)a == *(const int *)b;
}

static void
value_free(void *v)
{
    atomic_fetch_add(&freed_values, 1);
    free(v);
}

static const jit_lru_ops int_ops = {int_equal, free, value_free};

static int *
boxed(int v)
{
    int *p = malloc(sizeof *p);
    ck_assert_ptr_nonnull(p);
    *p = v;
    return p;
}

/* Insert key v with `bytes`; returns its entry, held by the caller. */
static jit_lru_entry *
put(jit_lru *c, int v, size_t bytes)
{
    jit_lru_entry *e;
    int *k = boxed(v);
    ck_assert_int_eq(jit_lru_get(c, (uint64_t)v, k, false, &e), JIT_LRU_MISS);
    jit_lru_fill(c, e, boxed(v * 10), bytes);
    return e;
}

static bool
has(jit_lru *c, int v)
{
    jit_lru_entry *e;
    int *k = boxed(v);
    jit_lru_result r = jit_lru_get(c, (uint64_t)v, k, false, &e);
    if (r == JIT_LRU_HIT) {
        free(k);
        ck_assert_int_eq(*(int *)jit_lru_value(e), v * 10);
        jit_lru_release(c, e);
        return true;
    }
    ck_assert_int_eq(r, JIT_LRU_MISS);
    jit_lru_abandon(c, e); /* frees the key, now the entry's */
    return false;
}

START_TEST(test_lru_limits)
{
    atomic_store(&freed_values, 0);
    jit_lru c = JIT_LRU_INIT(&int_ops, 3, 100);
    /* by count: the least recently used unheld entry goes */
    for (int v = 1; v <= 3; v++)
        jit_lru_release(&c, put(&c, v, 10));
    jit_lru_entry *e = NULL;
    int k1 = 1;
    ck_assert_int_eq(jit_lru_get(&c, 1, &k1, false, &e), JIT_LRU_HIT); /* 1 is now recent */
    jit_lru_release(&c, e);
    jit_lru_release(&c, put(&c, 4, 10));
    jit_lru_stats s;
    jit_lru_stats_get(&c, &s);
    ck_assert_int_eq(s.entries, 3);
    ck_assert_uint_eq(s.evictions, 1);
    ck_assert_int_eq(atomic_load(&freed_values), 1);
    /* by bytes, and held entries stay whatever the limits */
    jit_lru_entry *held = put(&c, 5, 90);
    jit_lru_stats_get(&c, &s);
    ck_assert_uint_le(s.bytes, 100);
    ck_assert(has(&c, 5));
    jit_lru_release(&c, put(&c, 6, 95)); /* 5 is held: 6 itself is evicted */
    ck_assert(has(&c, 5));
    ck_assert(!has(&c, 6));
    jit_lru_release(&c, held);
    jit_lru_trim(&c);
    jit_lru_stats_get(&c, &s);
    ck_assert_int_eq(s.entries, 0);
    ck_assert_uint_eq(s.bytes, 0);
    ck_assert_int_eq(atomic_load(&freed_values), 6);
}
END_TEST

/* Insert key v with 1 byte in group `group`; returns its entry, held by the caller. */
static jit_lru_entry *
put_group(jit_lru *c, int v, uint64_t group)
{
    jit_lru_entry *e;
    int *k = boxed(v);
    ck_assert_int_eq(jit_lru_get(c, (uint64_t)v, k, false, &e), JIT_LRU_MISS);
    jit_lru_fill_group(c, e, boxed(v * 10), 1, true, group);
    return e;
}

/* At most max_per_group cached entries of one group (the program cache: plans of one
 * generic graph); other groups and ungrouped entries stay; held entries stay whatever the
 * limit, and go at a later fill of their group once released. */
START_TEST(test_lru_groups)
{
    atomic_store(&freed_values, 0);
    jit_lru c = JIT_LRU_INIT_GROUPED(&int_ops, 100, 1000, 2);
    jit_lru_release(&c, put_group(&c, 100, 2)); /* another group */
    jit_lru_release(&c, put(&c, 200, 1));       /* no group */
    for (int v = 1; v <= 5; v++)
        jit_lru_release(&c, put_group(&c, v, 1));
    for (int v = 1; v <= 3; v++)
        ck_assert_msg(!has(&c, v), "entry %d of a full group is still cached", v);
    ck_assert(has(&c, 4) && has(&c, 5) && has(&c, 100) && has(&c, 200));
    jit_lru_stats s;
    jit_lru_stats_get(&c, &s);
    ck_assert_int_eq(s.entries, 4);
    ck_assert_uint_eq(s.evictions, 3);
    /* the least recently used goes: 4 is used, so 5 goes */
    ck_assert(has(&c, 4));
    jit_lru_release(&c, put_group(&c, 6, 1));
    ck_assert(has(&c, 4) && !has(&c, 5) && has(&c, 6));
    /* held entries stay past the limit */
    jit_lru_entry *h7 = put_group(&c, 7, 1), *h8 = put_group(&c, 8, 1);
    jit_lru_release(&c, put_group(&c, 9, 1));
    ck_assert(!has(&c, 4) && !has(&c, 6));
    jit_lru_stats_get(&c, &s);
    ck_assert_int_eq(s.entries, 5); /* 7, 8 (held), 9, 100, 200 */
    jit_lru_release(&c, h7);
    jit_lru_release(&c, h8);
    jit_lru_release(&c, put_group(&c, 10, 1));
    jit_lru_stats_get(&c, &s);
    ck_assert_int_eq(s.entries, 4); /* two of group 1, 100, 200 */
    ck_assert(has(&c, 10) && has(&c, 100) && has(&c, 200));
    jit_lru_trim(&c);
    ck_assert_int_eq(atomic_load(&freed_values), 12);
}
END_TEST

typedef struct waiter {
    jit_lru *c;
    jit_lru_result r;
    atomic_int started;
} waiter;

static void *
wait_key(void *arg)
{
    waiter *w = arg;
    jit_lru_entry *e;
    int *k = boxed(7);
    atomic_store(&w->started, 1);
    w->r = jit_lru_get(w->c, 7, k, true, &e);
    if (w->r == JIT_LRU_MISS) {
        jit_lru_fill(w->c, e, boxed(70), 1); /* it took over */
    } else {
        free(k);
    }
    if (w->r == JIT_LRU_HIT || w->r == JIT_LRU_MISS)
        jit_lru_release(w->c, e);
    return NULL;
}

START_TEST(test_lru_single_flight)
{
    jit_lru c = JIT_LRU_INIT(&int_ops, 8, 1000);
    for (int abandon = 0; abandon < 2; abandon++) {
        jit_lru_entry *e;
        int *k = boxed(7);
        ck_assert_int_eq(jit_lru_get(&c, 7, k, false, &e), JIT_LRU_MISS);
        int k2 = 7;
        jit_lru_entry *e2;
        ck_assert_int_eq(jit_lru_get(&c, 7, &k2, false, &e2), JIT_LRU_BUSY);
        waiter w = {.c = &c};
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, wait_key, &w), 0);
        while (!atomic_load(&w.started))
            sched_yield();
        nanosleep(&(struct timespec){0, 20000000}, NULL); /* let it block (the result is the same if it has not yet) */
        if (abandon)
            jit_lru_abandon(&c, e);
        else
            jit_lru_fill(&c, e, boxed(70), 1);
        pthread_join(th, NULL);
        ck_assert_int_eq(w.r, abandon ? JIT_LRU_MISS : JIT_LRU_HIT);
        if (!abandon)
            jit_lru_release(&c, e);
        ck_assert(has(&c, 7));
        jit_lru_trim(&c);
    }
}
END_TEST

/* The environment is read once (config.c): a variable set later changes nothing until
 * ir_config_reload, and a snapshot taken before stays as it was. */
START_TEST(test_environment_read_once)
{
    const ir_config *c0 = ir_config_get();
    uint64_t cap0 = c0->cache_cap;
    const char *was = getenv("KILN_CACHE_SIZE_MB");
    char saved[64] = "";
    if (was)
        snprintf(saved, sizeof saved, "%s", was);
    ck_assert_int_eq(setenv("KILN_CACHE_SIZE_MB", "7", 1), 0);
    kiln_cache_info info = KILN_CACHE_INFO_INIT;
    ck_assert_int_eq(kiln_cache_info_get(&info), KILN_OK);
    ck_assert_uint_eq(info.max_bytes, cap0);
    ir_config_reload();
    ck_assert_int_eq(kiln_cache_info_get(&info), KILN_OK);
    ck_assert_uint_eq(info.max_bytes, (uint64_t)7 << 20);
    ck_assert_uint_eq(c0->cache_cap, cap0);
    if (was)
        setenv("KILN_CACHE_SIZE_MB", saved, 1);
    else
        unsetenv("KILN_CACHE_SIZE_MB");
    ir_config_reload();
    ck_assert_uint_eq(ir_config_get()->cache_cap, cap0);
}
END_TEST

static Suite *
cache_suite(void)
{
    Suite *s = suite_create("cache");
    TCase *mem = tcase_create("memory");
    tcase_set_timeout(mem, 300);
    tcase_add_test(mem, test_lru_limits);
    tcase_add_test(mem, test_lru_groups);
    tcase_add_test(mem, test_lru_single_flight);
    tcase_add_test(mem, test_single_flight_threads);
    suite_add_tcase(s, mem);
    TCase *disk = tcase_create("disk");
    tcase_set_timeout(disk, 300);
    tcase_add_test(disk, test_second_process_does_no_codegen);
    tcase_add_test(disk, test_processes_fill_same_key);
    tcase_add_test(disk, test_corrupt_entry);
    tcase_add_test(disk, test_truncated_entry);
    tcase_add_test(disk, test_foreign_version_entry);
    tcase_add_test(disk, test_not_a_file_entry);
    tcase_add_test(disk, test_fifo_stats);
    tcase_add_test(disk, test_foreign_dir_untouched);
    tcase_add_test(disk, test_write_errors_said_once);
    tcase_add_test(disk, test_clear_reports_failures);
    tcase_add_test(disk, test_dangling_dir);
    tcase_add_test(disk, test_bad_size_cap);
    tcase_add_test(disk, test_stale_temp_files);
    tcase_add_test(disk, test_running_size);
    tcase_add_test(disk, test_scalar_arguments);
    tcase_add_test(disk, test_tiered);
    tcase_add_test(disk, test_tiered_error);
    tcase_add_test(disk, test_group_writable_dir_refused);
    tcase_add_test(disk, test_off_and_option);
    tcase_add_test(disk, test_trim_lru);
    tcase_add_test(disk, test_environment_read_once);
    suite_add_tcase(s, disk);
    return s;
}

int
main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--child") == 0)
        return child(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "--fsize") == 0)
        return fsize_child(argv[2]);
    if (argc == 4 && strcmp(argv[1], "--race") == 0)
        return race(argv[2], atoi(argv[3]));
    if (argc == 3 && strcmp(argv[1], "--tiered-exit") == 0)
        return tiered_exit(argv[2]);
    return ts_run(cache_suite());
}
