/* disk.c — the persistent kernel cache: the object code of one compiled module per file, so
 * a new process finds the kernels an earlier one compiled and does no LLVM code generation.
 *
 * Location: KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln (created 0700);
 * KILN_CACHE_DIR=off, or KILN_NO_DISK_CACHE in kiln_options, turns it off.
 *
 * Key: the module's kernel descriptions serialised field by field (jit_kdesc_serialise,
 * versioned), the format versions, kiln's version, LLVM's version, the target triple, CPU
 * name and feature string and the optimisation pipeline (jit_disk_module_key).  The file is
 * named by the first 128 bits of the key's BLAKE3 hash and holds the whole key, which must
 * match byte for byte: a different kiln, LLVM or CPU is a miss, never a wrong hit.
 *
 * Entry file (little-endian):
 *   0   8 bytes  magic "KILNOBJ\0"
 *   8   u32      JIT_DISK_FORMAT
 *   12  u32      0
 *   16  u64      key length K
 *   24  u64      object length B
 *   32  32 bytes BLAKE3 of the K + B bytes that follow
 *   64  key, then the object (a relocatable ELF object from LLVM)
 *
 * Trust: the directory is refused (a message on stderr once, the cache off) unless it is
 * owned by the effective user and not writable by group or others — the rule ssh applies
 * to ~/.ssh.  An entry is loaded only after its size, magic, format, content hash and key
 * have been checked; anything else is counted as rejected, ignored and rewritten by the
 * compile that follows.  Writes go to a temporary file in the directory, then rename(2):
 * readers see the old entry or the new one, never half of one, and two processes writing
 * the same key both succeed (the last rename wins; both wrote the same bytes).  A crash
 * can leave a file whose content hash fails: it is rejected, never executed.
 *
 * Size: after each write the directory is trimmed to KILN_CACHE_SIZE_MB (default 256 MiB),
 * least recently used first (a load touches the file's modification time).  The hit, miss,
 * rejected and write counts of every process are added up in the file `stats` under an
 * fcntl lock, for `kiln cache`. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <llvm-c/blake3.h>

#include "jit.h"

#define MAGIC "KILNOBJ"
#define HEADER 64
#define SUFFIX ".kobj"
#define TMP_PREFIX ".tmp-"
#define STATS_FILE "stats"
#define MAX_ENTRY_BYTES ((uint64_t)1 << 30)

static _Atomic uint64_t n_hits, n_misses, n_rejected, n_writes, n_write_errors;
static atomic_flag warned = ATOMIC_FLAG_INIT;

void
jit_disk_digest(const void *p, size_t n, uint8_t out[32])
{
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, p, n);
    llvm_blake3_hasher_finalize(&h, out, 32);
}

void
jit_disk_module_key(int n, const jit_kdesc *const *d, jit_buf *key)
{
    const jit_host *h = jit_host_info();
    jit_buf_str(key, "kiln module");
    jit_buf_u32(key, JIT_DISK_FORMAT);
    jit_buf_u32(key, JIT_KDESC_FORMAT);
    jit_buf_str(key, KILN_VERSION_STRING);
    jit_buf_str(key, h->llvm_version);
    jit_buf_str(key, h->triple);
    jit_buf_str(key, h->cpu);
    jit_buf_str(key, h->features);
    jit_buf_u32(key, (uint32_t)h->vector_bits);
    jit_buf_str(key, jit_engine_passes());
    jit_buf_u32(key, (uint32_t)n);
    for (int i = 0; i < n; i++)
        jit_kdesc_serialise(d[i], key);
}

/* ---- the directory ------------------------------------------------------------------------ */

static void
off(jit_disk *d, const char *fmt, const char *a, unsigned mode)
{
    d->on = false;
    snprintf(d->why, sizeof d->why, fmt, a, mode);
}

/* mkdir with mode 0700; an existing one is fine. */
static bool
make_dir(const char *path)
{
    return mkdir(path, 0700) == 0 || errno == EEXIST;
}

void
jit_disk_open(jit_disk *d, bool create)
{
    memset(d, 0, sizeof *d);
    const ir_config *cfg = ir_config_get();
    const char *env = cfg->cache_dir, *xdg = cfg->xdg_cache_home, *home = cfg->home;
    if (env && strcmp(env, "off") == 0) {
        snprintf(d->path, sizeof d->path, "off");
        off(d, "turned off (KILN_CACHE_DIR=off)%s", "", 0);
        return;
    }
    int n;
    if (env && *env)
        n = snprintf(d->path, sizeof d->path, "%s", env);
    else if (xdg && xdg[0] == '/')
        n = snprintf(d->path, sizeof d->path, "%s/kiln", xdg);
    else if (home && *home)
        n = snprintf(d->path, sizeof d->path, "%s/.cache/kiln", home);
    else {
        off(d, "no location (neither KILN_CACHE_DIR, XDG_CACHE_HOME nor HOME is set)%s", "", 0);
        return;
    }
    if (n < 0 || (size_t)n >= sizeof d->path - 64) {
        off(d, "the path is too long: %.200s", d->path, 0);
        return;
    }
    struct stat st;
    if (stat(d->path, &st) != 0) {
        if (errno != ENOENT) {
            off(d, "%.400s cannot be examined", d->path, 0);
            return;
        }
        if (!create) {
            d->on = true;
            d->missing = true;
            return;
        }
        /* ~/.cache (or $XDG_CACHE_HOME) first, when the default location is used */
        if (!(env && *env)) {
            char parent[sizeof d->path];
            snprintf(parent, sizeof parent, "%s", d->path);
            char *slash = strrchr(parent, '/');
            if (slash && slash != parent) {
                *slash = '\0';
                make_dir(parent);
            }
        }
        if (!make_dir(d->path) || stat(d->path, &st) != 0) {
            off(d, "%.400s cannot be created", d->path, 0);
            return;
        }
    }
    if (!S_ISDIR(st.st_mode)) {
        off(d, "%.400s is not a directory", d->path, 0);
        return;
    }
    if (st.st_uid != geteuid()) {
        off(d, "%.400s is owned by another user (uid %u): refused", d->path, (unsigned)st.st_uid);
        return;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        off(d, "%.400s is writable by group or others (mode %03o): refused; chmod go-w it",
            d->path, (unsigned)(st.st_mode & 0777));
        return;
    }
    d->on = true;
}

bool
jit_disk_for_compile(jit_disk *d)
{
    jit_disk_open(d, true);
    if (!d->on && strcmp(d->path, "off") != 0 && !atomic_flag_test_and_set(&warned))
        fprintf(stderr, "kiln: disk cache off: %s\n", d->why);
    return d->on;
}

static void
entry_path(const jit_disk *d, const uint8_t digest[32], char *out, size_t n)
{
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    snprintf(out, n, "%s/%s%s", d->path, hex, SUFFIX);
}

static uint64_t
get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void
put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Add to the directory's counters (hits, misses, rejected, writes) under an fcntl lock. */
static void
stats_add(const jit_disk *d, int which)
{
    char path[sizeof d->path + 16];
    snprintf(path, sizeof path, "%s/%s", d->path, STATS_FILE);
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_SETLKW, &lk) == 0) {
        unsigned char b[32] = {0};
        ssize_t got = pread(fd, b, sizeof b, 0);
        if (got != (ssize_t)sizeof b)
            memset(b, 0, sizeof b); /* new, or damaged: start again */
        put_u64(b + which * 8, get_u64(b + which * 8) + 1);
        if (pwrite(fd, b, sizeof b, 0) != (ssize_t)sizeof b)
            (void)0; /* counters are advisory */
        lk.l_type = F_UNLCK;
        fcntl(fd, F_SETLK, &lk);
    }
    close(fd);
}

enum { ST_HITS, ST_MISSES, ST_REJECTED, ST_WRITES };

static void
stats_read(const jit_disk *d, uint64_t v[4])
{
    char path[sizeof d->path + 16];
    snprintf(path, sizeof path, "%s/%s", d->path, STATS_FILE);
    memset(v, 0, 4 * sizeof v[0]);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    unsigned char b[32];
    if (pread(fd, b, sizeof b, 0) == (ssize_t)sizeof b)
        for (int k = 0; k < 4; k++)
            v[k] = get_u64(b + 8 * k);
    close(fd);
}

static void
reject(const jit_disk *d)
{
    atomic_fetch_add(&n_rejected, 1);
    atomic_fetch_add(&n_misses, 1);
    stats_add(d, ST_REJECTED);
    stats_add(d, ST_MISSES);
}

void
jit_disk_unusable(const jit_disk *d)
{
    /* this process's hit becomes a rejection; the directory's counts keep the hit and
     * add the rejection (they only ever grow) */
    atomic_fetch_sub(&n_hits, 1);
    reject(d);
}

/* ---- load and store --------------------------------------------------------------------- */

jit_disk_result
jit_disk_load(const jit_disk *d, const uint8_t digest[32], const jit_buf *key, void **data,
              const void **obj, size_t *len)
{
    char path[sizeof d->path + 64];
    entry_path(d, digest, path, sizeof path);
    *data = NULL;
    *obj = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        atomic_fetch_add(&n_misses, 1);
        stats_add(d, ST_MISSES);
        return JIT_DISK_MISS;
    }
    struct stat st;
    unsigned char *buf = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (uint64_t)st.st_size < HEADER || (uint64_t)st.st_size > MAX_ENTRY_BYTES)
        goto rejected;
    size_t size = (size_t)st.st_size;
    buf = ir_malloc(size);
    if (!buf)
        goto rejected;
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r <= 0)
            goto rejected;
        got += (size_t)r;
    }
    uint64_t format = get_u64(buf + 8); /* u32 format, u32 0 */
    uint64_t klen = get_u64(buf + 16), olen = get_u64(buf + 24);
    if (memcmp(buf, MAGIC, 8) != 0 || format != JIT_DISK_FORMAT || klen != key->len ||
        olen == 0 || olen > size || klen > size - HEADER - olen ||
        HEADER + klen + olen != size)
        goto rejected;
    uint8_t h[32];
    jit_disk_digest(buf + HEADER, size - HEADER, h);
    if (memcmp(h, buf + 32, 32) != 0 || memcmp(buf + HEADER, key->data, key->len) != 0)
        goto rejected;
    /* least recently used = oldest modification time */
    if (futimens(fd, NULL) != 0)
        (void)0; /* only the trimming order suffers */
    close(fd);
    atomic_fetch_add(&n_hits, 1);
    stats_add(d, ST_HITS);
    *data = buf;
    *obj = buf + HEADER + klen;
    *len = (size_t)olen;
    return JIT_DISK_HIT;
rejected:
    ir_free(buf);
    close(fd);
    reject(d);
    return JIT_DISK_REJECTED;
}

static bool
write_all(int fd, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            return false;
        }
        b += w;
        n -= (size_t)w;
    }
    return true;
}

void
jit_disk_store(const jit_disk *d, const uint8_t digest[32], const jit_buf *key, const void *obj,
               size_t len)
{
    char path[sizeof d->path + 64], tmp[sizeof d->path + 96];
    static _Atomic unsigned serial;
    entry_path(d, digest, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s/%s%ld-%u-%llx", d->path, TMP_PREFIX, (long)getpid(),
             atomic_fetch_add(&serial, 1), (unsigned long long)time(NULL));
    unsigned char head[HEADER] = {0};
    memcpy(head, MAGIC, 8);
    put_u64(head + 8, JIT_DISK_FORMAT); /* u32 format, u32 0 */
    put_u64(head + 16, key->len);
    put_u64(head + 24, len);
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, key->data, key->len);
    llvm_blake3_hasher_update(&h, obj, len);
    llvm_blake3_hasher_finalize(&h, head + 32, 32);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && write_all(fd, head, sizeof head) && write_all(fd, key->data, key->len) &&
              write_all(fd, obj, len);
    if (fd >= 0 && close(fd) != 0)
        ok = false;
    if (ok && rename(tmp, path) != 0)
        ok = false;
    if (!ok) {
        if (fd >= 0)
            unlink(tmp);
        atomic_fetch_add(&n_write_errors, 1);
        return;
    }
    atomic_fetch_add(&n_writes, 1);
    stats_add(d, ST_WRITES);
    jit_disk_trim(d, jit_disk_cap());
}

/* ---- trimming ------------------------------------------------------------------------------- */

uint64_t
jit_disk_cap(void)
{
    return ir_config_get()->cache_cap;
}

typedef struct dent {
    char name[64];
    struct timespec mtime;
    uint64_t bytes;
} dent;

static bool
is_entry(const char *name)
{
    size_t n = strlen(name);
    return n == 32 + strlen(SUFFIX) && strcmp(name + 32, SUFFIX) == 0;
}

static int
older_first(const void *a, const void *b)
{
    const dent *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The entries of the directory (and, with `tmp`, stale temporary files removed: older than
 * an hour, left by a process that died while writing). */
static dent *
scan(const jit_disk *d, int *count, uint64_t *bytes, bool tmp)
{
    *count = 0;
    *bytes = 0;
    DIR *dir = opendir(d->path);
    if (!dir)
        return NULL;
    dent *v = NULL;
    int cap = 0;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        char path[sizeof d->path + 300];
        snprintf(path, sizeof path, "%s/%s", d->path, de->d_name);
        struct stat st;
        if (tmp && strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0) {
            if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && now - st.st_mtime > 3600)
                unlink(path);
            continue;
        }
        if (!is_entry(de->d_name) || lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (*count == cap) {
            int nc = cap ? 2 * cap : 64;
            dent *nv = ir_realloc(v, (size_t)nc * sizeof *nv);
            if (!nv)
                break;
            v = nv;
            cap = nc;
        }
        dent *e = &v[(*count)++];
        snprintf(e->name, sizeof e->name, "%s", de->d_name);
        e->mtime = st.st_mtim;
        e->bytes = (uint64_t)st.st_size;
        *bytes += e->bytes;
    }
    closedir(dir);
    return v;
}

int
jit_disk_trim(const jit_disk *d, uint64_t cap)
{
    int count, removed = 0;
    uint64_t bytes;
    dent *v = scan(d, &count, &bytes, true);
    if (v && bytes > cap) {
        qsort(v, (size_t)count, sizeof *v, older_first);
        for (int i = 0; i < count && bytes > cap; i++) {
            char path[sizeof d->path + 80];
            snprintf(path, sizeof path, "%s/%s", d->path, v[i].name);
            if (unlink(path) == 0) {
                bytes -= v[i].bytes;
                removed++;
            }
        }
    }
    ir_free(v);
    return removed;
}

void
jit_disk_counters(jit_disk_stats *c)
{
    c->hits = atomic_load(&n_hits);
    c->misses = atomic_load(&n_misses);
    c->rejected = atomic_load(&n_rejected);
    c->writes = atomic_load(&n_writes);
    c->write_errors = atomic_load(&n_write_errors);
}

/* ---- the public face (kiln cache) -------------------------------------------------------- */

/* Fill the library's whole struct; kiln_cache_info_get copies what the caller has room for. */
static void
describe(kiln_cache_info *info)
{
    jit_disk d;
    jit_disk_open(&d, false);
    snprintf(info->path, sizeof info->path, "%s", d.path);
    snprintf(info->reason, sizeof info->reason, "%s",
             d.on ? (d.missing ? "not created yet" : "") : d.why);
    info->enabled = d.on;
    info->max_bytes = jit_disk_cap();
    if (!d.on || d.missing)
        return;
    int count;
    uint64_t bytes;
    ir_free(scan(&d, &count, &bytes, false));
    info->entries = (uint64_t)count;
    info->bytes = bytes;
    uint64_t v[4];
    stats_read(&d, v);
    info->hits = v[ST_HITS];
    info->misses = v[ST_MISSES];
    info->rejected = v[ST_REJECTED];
    info->writes = v[ST_WRITES];
}

kiln_status
kiln_cache_info_get(kiln_cache_info *info)
{
    const char *api = "kiln_cache_info_get";
    const size_t min = offsetof(kiln_cache_info, path) + sizeof info->path;
    kiln_cache_info ci = {.size = sizeof ci};
    describe(&ci);
    return ir_abi_out(api, "kiln_cache_info", info, &ci, sizeof ci, min);
}

/* The directory for clear and trim: refused or off is an error (nothing is touched). */
static kiln_status
open_existing(const char *api, jit_disk *d)
{
    jit_disk_open(d, false);
    if (!d->on)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: disk cache off: %s", api, d->why);
    return KILN_OK;
}

kiln_status
kiln_cache_clear(uint64_t *removed)
{
    jit_disk d;
    kiln_status st = open_existing("kiln_cache_clear", &d);
    if (removed)
        *removed = 0;
    if (st || d.missing)
        return st;
    int count;
    uint64_t bytes, n = 0;
    dent *v = scan(&d, &count, &bytes, true);
    for (int i = 0; i < count; i++) {
        char path[sizeof d.path + 80];
        snprintf(path, sizeof path, "%s/%s", d.path, v[i].name);
        n += unlink(path) == 0;
    }
    ir_free(v);
    char path[sizeof d.path + 16];
    snprintf(path, sizeof path, "%s/%s", d.path, STATS_FILE);
    unlink(path);
    if (removed)
        *removed = n;
    return KILN_OK;
}

kiln_status
kiln_cache_trim(uint64_t max_bytes, uint64_t *removed)
{
    jit_disk d;
    kiln_status st = open_existing("kiln_cache_trim", &d);
    if (removed)
        *removed = 0;
    if (st || d.missing)
        return st;
    int n = jit_disk_trim(&d, max_bytes ? max_bytes : jit_disk_cap());
    if (removed)
        *removed = (uint64_t)n;
    return KILN_OK;
}

