/* cmd_cache.c — `kiln cache`: the persistent kernel cache (lib/jit/disk.c) from the shell:
 * where it is, how big, how it has been used; `clear` and `trim`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void
cmd_cache_help(FILE *f)
{
    fputs("usage: kiln cache [clear | trim [--max-mb N]]\n"
          "\n"
          "The persistent kernel cache: compiled modules kept on disk, so a new process skips\n"
          "LLVM code generation.  Its location is KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln,\n"
          "else ~/.cache/kiln; KILN_CACHE_DIR=off turns it off.  A directory owned by another\n"
          "user or writable by group or others is refused (the cache is then off), and so\n"
          "is a directory kiln did not create that holds other files than kiln's (kiln\n"
          "marks its own with a CACHEDIR.TAG).\n"
          "\n"
          "  kiln cache          the location, whether it is in use (and why not, or why\n"
          "                      nothing new can be stored), the entry count, the size\n"
          "                      against the cap (KILN_CACHE_SIZE_MB, a whole number of MiB,\n"
          "                      default 256; any other value turns the cache off), the\n"
          "                      temporary files of writes in progress or interrupted, and\n"
          "                      the hit, miss, rejected and write counts of every process\n"
          "                      that used it since it was last cleared\n"
          "  kiln cache clear    remove every entry, the temporary files of interrupted\n"
          "                      writes and the counts (kiln's files only)\n"
          "  kiln cache trim     remove least recently used entries down to the cap, or to\n"
          "                      N MiB with --max-mb N\n"
          "\n"
          "clear and trim exit 1, saying which file and why, when a file cannot be removed.\n",
          f);
}

static int
show(void)
{
    kiln_cache_info ci = KILN_CACHE_INFO_INIT;
    if (kiln_cache_info_get(&ci))
        return cli_fail();
    printf("location: %s\n", ci.path);
    printf("state:    %s%s%s\n", ci.enabled ? "on" : "off", ci.reason[0] ? ": " : "", ci.reason);
    printf("entries:  %llu\n", (unsigned long long)ci.entries);
    printf("size:     %.2f MiB of %.0f MiB (%llu bytes)\n", (double)ci.bytes / (1 << 20),
           (double)ci.max_bytes / (1 << 20), (unsigned long long)ci.bytes);
    printf("temp:     %llu files of writes in progress or interrupted (%llu bytes)\n",
           (unsigned long long)ci.temp_files, (unsigned long long)ci.temp_bytes);
    printf("hits:     %llu\nmisses:   %llu (of them rejected entries: %llu)\nwrites:   %llu\n",
           (unsigned long long)ci.hits, (unsigned long long)ci.misses,
           (unsigned long long)ci.rejected, (unsigned long long)ci.writes);
    return fflush(stdout) == 0 ? CLI_OK : CLI_FAIL;
}

int
cmd_cache(int argc, char **argv)
{
    if (argc > 1 && cli_is_help(argv[1])) {
        cmd_cache_help(stdout);
        return CLI_OK;
    }
    if (argc == 1)
        return show();
    uint64_t removed = 0;
    if (strcmp(argv[1], "clear") == 0) {
        if (argc > 2)
            return cli_usage("cache", "unexpected argument '%s'", argv[2]);
        if (kiln_cache_clear(&removed))
            return cli_fail();
        printf("removed %llu entries\n", (unsigned long long)removed);
        return CLI_OK;
    }
    if (strcmp(argv[1], "trim") == 0) {
        uint64_t max = 0;
        for (int i = 2; i < argc; i++) {
            const char *v;
            int m = cli_option("cache", argc, argv, &i, "--max-mb", &v);
            if (m < 0)
                return CLI_USAGE;
            char *end;
            unsigned long long mb = m ? strtoull(v, &end, 10) : 0;
            if (m == 0 || *end != '\0' || mb == 0 || mb >= (1ull << 40))
                return m ? cli_usage("cache", "--max-mb needs a whole number of MiB >= 1")
                         : cli_usage("cache", "unexpected argument '%s'", argv[i]);
            max = (uint64_t)mb << 20;
        }
        if (kiln_cache_trim(max, &removed))
            return cli_fail();
        printf("removed %llu entries\n", (unsigned long long)removed);
        return CLI_OK;
    }
    return cli_usage("cache", "unknown subcommand '%s' (expected clear or trim)", argv[1]);
}
