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
 * compile that follows.  Every file is opened with O_NONBLOCK and checked to be a regular
 * file (fstat) before it is read: a FIFO in an entry's place would otherwise hang every
 * compile in open(2); an empty directory there is removed by the write that replaces it.  Writes go to a temporary file in the directory, then rename(2):
 * readers see the old entry or the new one, never half of one, and two processes writing
 * the same key both succeed (the last rename wins; both wrote the same bytes).  A crash
 * can leave a file whose content hash fails: it is rejected, never executed.
 *
 * Size: after each write the directory is trimmed to KILN_CACHE_SIZE_MB (default 256 MiB;
 * a value that is not a whole number of MiB turns the cache off), least recently used
 * first (a load touches the file's modification time), the size kept as a running total
 * so that a write scans the directory only when it passes the cap (RESCAN_WRITES), and
 * trimmed then to 7/8 of it.  Temporary files count against
 * the cap; those of a writer that died (tmp_stale) are removed by trims and clears.
 * Failures are said: a process's first failed write on stderr with its errno text, a
 * file clear or trim cannot remove as KILN_ERR_IO.  The hit, miss,
 * rejected and write counts of every process are added up in the file `kiln-stats` under an
 * fcntl lock, for `kiln cache`.
 *
 * Ownership: kiln marks a directory it creates with a CACHEDIR.TAG (bford.info/cachedir)
 * and takes an existing one only when the tag is there or nothing but kiln's files are
 * (then it writes the tag): KILN_CACHE_DIR pointed at a project folder is refused, and
 * counters are never written into, nor files cleared from, a directory without the tag. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <llvm-c/blake3.h>

#include "jit.h"

#define MAGIC "KILNOBJ"
#define HEADER 64
#define SUFFIX ".kobj"
#define TMP_PREFIX ".tmp-"
#define STATS_FILE "kiln-stats"
#define OLD_STATS_FILE "stats" /* kiln's counters before the directory was marked */
#define TAG_FILE "CACHEDIR.TAG"
#define TAG_SIGNATURE "Signature: 8a477f597d28d172789f06886806bc55\n"
#define TAG_TEXT                                                                               \
    TAG_SIGNATURE "# This file is a cache directory tag created by kiln for its kernel cache.\n" \
                  "# For information about cache directory tags see https://bford.info/cachedir/\n"
#define MAX_ENTRY_BYTES ((uint64_t)1 << 30)

static _Atomic uint64_t n_hits, n_misses, n_rejected, n_writes, n_write_errors, n_scans;
static atomic_flag warned = ATOMIC_FLAG_INIT, warned_write = ATOMIC_FLAG_INIT;
static _Atomic unsigned serial; /* temporary file names of this process */

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

static int open_regular(const char *path, int flags);

/* Does dir hold kiln's CACHEDIR.TAG (the signature, and written by kiln)? */
static bool
has_tag(const char *dir)
{
    char path[4200], b[256];
    snprintf(path, sizeof path, "%s/%s", dir, TAG_FILE);
    int fd = open_regular(path, O_RDONLY);
    if (fd < 0)
        return false;
    ssize_t n = pread(fd, b, sizeof b - 1, 0);
    close(fd);
    if (n < 0)
        return false;
    b[n] = '\0';
    return strncmp(b, TAG_SIGNATURE, strlen(TAG_SIGNATURE)) == 0 && strstr(b, "created by kiln");
}

static bool
is_entry(const char *name)
{
    size_t n = strlen(name);
    return n == 32 + strlen(SUFFIX) && strcmp(name + 32, SUFFIX) == 0;
}

/* Does dir hold nothing but what kiln writes there (entries, temporary files, counters,
 * also those of a kiln that did not mark its directory yet)?  Then kiln may take it. */
static bool
only_kiln_files(const char *dir)
{
    DIR *dd = opendir(dir);
    if (!dd)
        return false;
    bool ok = true;
    struct dirent *de;
    while (ok && (de = readdir(dd)) != NULL) {
        const char *n = de->d_name;
        ok = strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || is_entry(n) ||
             strncmp(n, TMP_PREFIX, strlen(TMP_PREFIX)) == 0 || strcmp(n, STATS_FILE) == 0 ||
             strcmp(n, OLD_STATS_FILE) == 0;
    }
    closedir(dd);
    return ok;
}

/* Mark dir as kiln's: CACHEDIR.TAG, written whole (temporary file, rename). */
static bool
write_tag(const char *dir)
{
    char tmp[4200], path[4200];
    snprintf(tmp, sizeof tmp, "%s/%s%ld-tag%u", dir, TMP_PREFIX, (long)getpid(),
             atomic_fetch_add(&serial, 1));
    snprintf(path, sizeof path, "%s/%s", dir, TAG_FILE);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return false;
    size_t n = strlen(TAG_TEXT);
    bool ok = write(fd, TAG_TEXT, n) == (ssize_t)n;
    ok = close(fd) == 0 && ok && rename(tmp, path) == 0;
    if (!ok)
        unlink(tmp);
    return ok;
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
    const char *cap = ir_config_get()->cache_size_mb;
    if (*cap && jit_disk_cap() == 0) {
        off(d, "KILN_CACHE_SIZE_MB=%.100s is not a whole number of MiB from 1 to 2^40 - 1",
            cap, 0);
        return;
    }
    struct stat st;
    bool created = false;
    if (stat(d->path, &st) != 0) {
        if (errno != ENOENT) {
            snprintf(d->why, sizeof d->why, "%.400s cannot be examined: %s", d->path, strerror(errno));
            return;
        }
        if (lstat(d->path, &st) == 0) {
            off(d, "%.400s is a symbolic link to nothing", d->path, 0);
            return;
        }
        if (!create) {
            /* what a compile would find: the parent must be a directory it may write (or,
             * at the default location, the parent's parent, where it makes the parent) */
            char parent[sizeof d->path];
            snprintf(parent, sizeof parent, "%s", d->path);
            char *slash = strrchr(parent, '/');
            if (slash && slash != parent)
                *slash = '\0';
            else
                snprintf(parent, sizeof parent, "%s", slash ? "/" : ".");
            int e = access(parent, W_OK | X_OK) == 0 ? 0 : errno;
            if (e == ENOENT && !(env && *env)) {
                slash = strrchr(parent, '/');
                if (slash && slash != parent)
                    *slash = '\0';
                e = access(parent, W_OK | X_OK) == 0 ? 0 : errno;
            }
            if (e) {
                snprintf(d->why, sizeof d->why, "%.400s cannot be created: %s", d->path, strerror(e));
                return;
            }
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
            snprintf(d->why, sizeof d->why, "%.400s cannot be created: %s", d->path, strerror(errno));
            return;
        }
        created = true;
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
    /* kiln's own directory carries its tag; one it did not create is taken (and tagged)
     * only when nothing but kiln's files are in it: counters are never written into, nor
     * files removed from, a directory of the user's (a project folder) */
    d->marked = has_tag(d->path);
    if (!d->marked && !created && !only_kiln_files(d->path)) {
        off(d, "%.300s is not kiln's cache (no CACHEDIR.TAG of kiln's, and other files in "
               "it): refused; point KILN_CACHE_DIR at a new or empty directory",
            d->path, 0);
        return;
    }
    if (!d->marked && create)
        d->marked = write_tag(d->path);
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

/* open(2) a file of the directory that must be a regular file: never blocks (a FIFO put
 * there would hang open until a writer came), never follows a link; -1 (errno EINVAL) for
 * anything that is not a regular file. */
static int
open_regular(const char *path, int flags)
{
    int fd = open(path, flags | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
}

/* Add to the directory's counters (hits, misses, rejected, writes) under an fcntl lock. */
static void
stats_add(const jit_disk *d, int which)
{
    if (!d->marked)
        return;
    char path[sizeof d->path + 16];
    snprintf(path, sizeof path, "%s/%s", d->path, STATS_FILE);
    int fd = open_regular(path, O_RDWR | O_CREAT);
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
    if (!d->marked)
        return;
    int fd = open_regular(path, O_RDONLY);
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
    /* O_NONBLOCK: a FIFO in an entry's place must not hang the compile */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 && errno != ENOENT) {
        reject(d); /* a link, or what cannot be opened, in an entry's place */
        return JIT_DISK_REJECTED;
    }
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
    if (!buf) { /* out of memory: a miss (the compile goes on), not the entry's fault */
        close(fd);
        atomic_fetch_add(&n_misses, 1);
        stats_add(d, ST_MISSES);
        return JIT_DISK_MISS;
    }
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

typedef struct trimmed {
    int removed;     /* entries removed */
    int failed;      /* files that could not be removed */
    int err;         /* and the first one's errno and name */
    char what[300];
    uint64_t left;   /* bytes of entries and temporary files left */
} trimmed;
static void trim(const jit_disk *d, uint64_t cap, uint64_t to, trimmed *t);

/* The directory's size as this process last scanned it plus what it wrote since, so that
 * a write scans the directory (docs/benchmarking.md, "Disk cache: when a write scans the
 * directory") only when that passes the cap, or after RESCAN_WRITES writes (to see what other
 * processes wrote).  A trim a write starts goes down to 7/8 of the cap, so the writes
 * after it do not scan again at once. */
#define RESCAN_WRITES 256
static pthread_mutex_t size_lock = PTHREAD_MUTEX_INITIALIZER;
static char size_dir[sizeof ((jit_disk *)0)->path];
static uint64_t size_bytes;
static unsigned size_writes; /* since the last scan; RESCAN_WRITES: none yet */

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
    const char *what = "creating a temporary file";
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int err = fd < 0 ? errno : 0;
    errno = 0;
    if (fd >= 0 && !(write_all(fd, head, sizeof head) && write_all(fd, key->data, key->len) &&
                     write_all(fd, obj, len))) {
        what = "writing it";
        err = errno ? errno : EIO;
    }
    if (fd >= 0 && close(fd) != 0 && !err) {
        what = "writing it";
        err = errno;
    }
    if (!err && rename(tmp, path) != 0) {
        /* an empty directory in the entry's place goes (anything else in it is not ours:
         * the write fails) */
        what = "renaming it into place";
        err = errno;
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
            err = rmdir(path) == 0 && rename(tmp, path) == 0 ? 0 : errno;
    }
    if (err) {
        if (fd >= 0)
            unlink(tmp);
        atomic_fetch_add(&n_write_errors, 1);
        /* said once per process: a read-only or full file system fails every write */
        if (!atomic_flag_test_and_set(&warned_write))
            fprintf(stderr, "kiln: disk cache: cannot store compiled code in %s: %s: %s (kernels "
                    "are compiled as usual; further write errors are not reported)\n",
                    d->path, what, strerror(err));
        return;
    }
    atomic_fetch_add(&n_writes, 1);
    stats_add(d, ST_WRITES);
    uint64_t cap = jit_disk_cap();
    pthread_mutex_lock(&size_lock);
    if (strcmp(size_dir, d->path) != 0) {
        snprintf(size_dir, sizeof size_dir, "%s", d->path);
        size_writes = RESCAN_WRITES;
    }
    size_bytes += HEADER + key->len + len; /* a rewritten entry counts twice: a scan sooner */
    if (size_bytes > cap || ++size_writes >= RESCAN_WRITES) {
        trimmed t;
        trim(d, cap, cap - cap / 8, &t);
        size_bytes = t.left;
        size_writes = 0;
    }
    pthread_mutex_unlock(&size_lock);
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

static bool
is_tmp(const char *name)
{
    return strncmp(name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0;
}

/* Is temporary file `name` (lstat st) stale: left by a writer that died?  Its name starts
 * with the writer's pid: stale when that process is gone (and the file is older than a
 * write takes, STALE_TMP_S, in case the directory is shared with another pid namespace),
 * or whatever the pid when older than an hour. */
#define STALE_TMP_S 10
static bool
tmp_stale(const char *name, const struct stat *st, time_t now)
{
    if (now - st->st_mtime > 3600)
        return true;
    const char *p = name + strlen(TMP_PREFIX);
    char *end;
    long pid = strtol(p, &end, 10);
    return end != p && *end == '-' && pid > 0 && now - st->st_mtime > STALE_TMP_S &&
           kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* What scan found: the entries (regular files named like one) and their bytes, and the
 * temporary files of writers (in progress or left by one that died): their count and
 * bytes.  With `tidy`, the stale temporary files are removed first (and not counted). */
typedef struct dscan {
    dent *v;
    int count;
    uint64_t bytes;
    int ntmp;
    uint64_t tmp_bytes;
} dscan;

/* False (errno set) when the directory cannot be read. */
static bool
scan(const jit_disk *d, dscan *s, bool tidy)
{
    memset(s, 0, sizeof *s);
    atomic_fetch_add(&n_scans, 1);
    DIR *dir = opendir(d->path);
    if (!dir)
        return false;
    int cap = 0;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        char path[sizeof d->path + 300];
        snprintf(path, sizeof path, "%s/%s", d->path, de->d_name);
        struct stat st;
        if (is_tmp(de->d_name)) {
            if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
                continue;
            if (tidy && tmp_stale(de->d_name, &st, now) && unlink(path) == 0)
                continue;
            s->ntmp++;
            s->tmp_bytes += (uint64_t)st.st_size;
            continue;
        }
        if (!is_entry(de->d_name) || lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (s->count == cap) {
            int nc = cap ? 2 * cap : 64;
            dent *nv = ir_realloc(s->v, (size_t)nc * sizeof *nv);
            if (!nv)
                break;
            s->v = nv;
            cap = nc;
        }
        dent *e = &s->v[s->count++];
        snprintf(e->name, sizeof e->name, "%s", de->d_name);
        e->mtime = st.st_mtim;
        e->bytes = (uint64_t)st.st_size;
        s->bytes += e->bytes;
    }
    closedir(dir);
    return true;
}

static void
trim_failed(trimmed *t, const char *name)
{
    if (!t->failed++) {
        t->err = errno;
        snprintf(t->what, sizeof t->what, "%.200s", name);
    }
}

/* Remove the stale temporary files; then, when the entries and the temporary files left
 * take more than cap bytes, least recently used entries until they take at most `to`. */
static void
trim(const jit_disk *d, uint64_t cap, uint64_t to, trimmed *t)
{
    memset(t, 0, sizeof *t);
    dscan s;
    if (!scan(d, &s, true)) {
        trim_failed(t, ".");
        return;
    }
    uint64_t bytes = s.bytes + s.tmp_bytes;
    if (bytes > cap && s.count > 0) {
        qsort(s.v, (size_t)s.count, sizeof *s.v, older_first);
        for (int i = 0; i < s.count && bytes > to; i++) {
            char path[sizeof d->path + 80];
            snprintf(path, sizeof path, "%s/%s", d->path, s.v[i].name);
            if (unlink(path) == 0) {
                bytes -= s.v[i].bytes;
                t->removed++;
            } else if (errno != ENOENT) { /* ENOENT: another process removed it */
                trim_failed(t, s.v[i].name);
            }
        }
    }
    t->left = bytes;
    ir_free(s.v);
}

void
jit_disk_counters(jit_disk_stats *c)
{
    c->hits = atomic_load(&n_hits);
    c->misses = atomic_load(&n_misses);
    c->rejected = atomic_load(&n_rejected);
    c->writes = atomic_load(&n_writes);
    c->write_errors = atomic_load(&n_write_errors);
    c->scans = atomic_load(&n_scans);
}

/* ---- the public face (kiln cache) -------------------------------------------------------- */

/* Fill the library's whole struct; kiln_cache_info_get copies what the caller has room for. */
static kiln_status
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
        return KILN_OK;
    /* in use, but every write would fail: say so (a compile says it once, on stderr) */
    struct statvfs fs;
    if (access(d.path, W_OK | X_OK) != 0)
        snprintf(info->reason, sizeof info->reason, "not writable (%s): nothing new is stored",
                 strerror(errno));
    else if (statvfs(d.path, &fs) == 0 && fs.f_bavail == 0)
        snprintf(info->reason, sizeof info->reason, "the file system is full: nothing new is stored");
    dscan s;
    if (!scan(&d, &s, false))
        return ir_error(KILN_ERR_IO, "kiln_cache_info_get: cannot read %.400s: %s", d.path,
                        strerror(errno));
    ir_free(s.v);
    info->entries = (uint64_t)s.count;
    info->bytes = s.bytes;
    info->temp_files = (uint64_t)s.ntmp;
    info->temp_bytes = s.tmp_bytes;
    uint64_t v[4];
    stats_read(&d, v);
    info->hits = v[ST_HITS];
    info->misses = v[ST_MISSES];
    info->rejected = v[ST_REJECTED];
    info->writes = v[ST_WRITES];
    return KILN_OK;
}

kiln_status
kiln_cache_info_get(kiln_cache_info *info)
{
    const char *api = "kiln_cache_info_get";
    const size_t min = offsetof(kiln_cache_info, path) + sizeof info->path;
    kiln_cache_info ci = {.size = sizeof ci};
    kiln_status st = describe(&ci);
    if (st)
        return st;
    return ir_abi_out(api, "kiln_cache_info", info, &ci, sizeof ci, min);
}

/* The directory for clear and trim: refused or off is an error (nothing is touched); a
 * directory holding only kiln's files is marked first. */
static kiln_status
open_existing(const char *api, jit_disk *d)
{
    jit_disk_open(d, false);
    if (!d->on)
        return ir_error(KILN_ERR_INVALID_ARG, "%s: disk cache off: %s", api, d->why);
    if (!d->missing && !d->marked && !(d->marked = write_tag(d->path)))
        return ir_error(KILN_ERR_IO, "%s: cannot mark %.400s as kiln's cache: %s", api, d->path,
                        strerror(errno));
    return KILN_OK;
}

static kiln_status
removal_failed(const char *api, const jit_disk *d, const trimmed *t)
{
    return ir_error(KILN_ERR_IO, "%s: cannot remove %d file%s (removed %d entries): %.400s/%.200s: %s",
                    api, t->failed, t->failed == 1 ? "" : "s", t->removed, d->path, t->what,
                    strerror(t->err));
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
    DIR *dir = opendir(d.path);
    if (!dir)
        return ir_error(KILN_ERR_IO, "kiln_cache_clear: cannot read %.400s: %s", d.path,
                        strerror(errno));
    /* every entry (also what is not a file in an entry's place), every temporary file of
     * a writer that died, the counters; a write in progress keeps its temporary file */
    trimmed t;
    memset(&t, 0, sizeof t);
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        const char *n = de->d_name;
        char path[sizeof d.path + 300];
        snprintf(path, sizeof path, "%s/%s", d.path, n);
        struct stat st;
        if (!(is_entry(n) || is_tmp(n) || strcmp(n, STATS_FILE) == 0) || lstat(path, &st) != 0 ||
            (is_tmp(n) && !(S_ISREG(st.st_mode) && tmp_stale(n, &st, now))))
            continue;
        if ((S_ISDIR(st.st_mode) ? rmdir(path) : unlink(path)) == 0)
            t.removed += is_entry(n);
        else if (errno != ENOENT)
            trim_failed(&t, n);
    }
    closedir(dir);
    if (removed)
        *removed = (uint64_t)t.removed;
    return t.failed ? removal_failed("kiln_cache_clear", &d, &t) : KILN_OK;
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
    trimmed t;
    uint64_t cap = max_bytes ? max_bytes : jit_disk_cap();
    trim(&d, cap, cap, &t);
    if (removed)
        *removed = (uint64_t)t.removed;
    return t.failed ? removal_failed("kiln_cache_trim", &d, &t) : KILN_OK;
}
