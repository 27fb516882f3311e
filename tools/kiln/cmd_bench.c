/* cmd_bench.c — `kiln bench`: fused against eager against the machine's own bandwidth.
 * The options and the loop over the workloads; bench_measure.c measures each one (its
 * header lists the figures), bench_report.c prints them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_run.h"
#include "jit.h"


void
cmd_bench_help(FILE *f)
{
    fprintf(f,
            "usage: kiln bench [FILE.kiln | WORKLOAD ...] [options]\n"
            "\n"
            "Benchmark fused against eager execution.  With no files, runs the built-in suite\n"
            "(chain gelu softmax layernorm bcast l2norm small mlp colsum rmsnorm logsumexp\n"
            "sgemm sgemm_1t attn matmul_small gemv decode; see docs/benchmarking.md); a\n"
            "WORKLOAD name runs that one.  A workload whose name ends in _1t runs on one\n"
            "thread.  decode also runs with sizes that change every step: the same step\n"
            "captured through the C API with K/V caches of 512, 513, ... 542 rows (full size\n"
            "whatever --scale), reported as the per-step overhead (capture + scope end +\n"
            "plan, median, us), the run, and the kernels compiled after the first step.\n"
            "Inputs are random with a fixed seed.  Each workload is bracketed by a STREAM-style\n"
            "probe (copy, triad, copy with streaming stores, and a read) on the same thread\n"
            "pool; %%bw is against the probe's best run of any of them.  A workload that only\n"
            "reads (gemv, decode) is also given against the read's best run, and as the\n"
            "median of 15 pairs, each a run of it right after a run of the read.\n"
            "Memory-bound workloads run from cold caches: a buffer four times the last-level\n"
            "cache is read between timed runs, outside the timing.  A workload with matmuls is\n"
            "also bracketed by an FMA probe (a kiln-compiled loop of FMAs), for %%peak.\n"
            "\n"
            "options:\n"
            "  --scale S        divide the leading dimension of the main inputs by S (quick runs)\n"
            "  --threads N      thread pool size (default: KILN_NUM_THREADS or all cores)\n"
            "  --mode M         fused (fused only), eager (fused and eager, the default) or all\n"
            "                   (also the reference interpreter, slow)\n"
            "  --time SECONDS   timed-run budget per mode and workload (default 1)\n"
            "  --warm           keep the caches between timed runs (cache-resident figures,\n"
            "                   labelled 'warm' in the table and the JSON)\n"
            "  --stores S       auto (default: kiln decides by size), stream (non-temporal\n"
            "                   stores wherever allowed: KILN_STORES_STREAM) or cached\n"
            "                   (KILN_STORES_CACHED)\n"
            "  --code C         auto (default: kiln decides by size), full (KILN_CODE_FULL) or\n"
            "                   compact (KILN_CODE_COMPACT: out-of-line vector math, one masked\n"
            "                   loop body, LLVM's fast code generator; docs/jit.md)\n"
            "  --json FILE      every figure, the machine and kiln's version as JSON\n"
            "  --plot FILE.svg  bars of fused and eager bandwidth against the probe\n"
            "  -h, --help       this text\n"
            "\n"
            "Progress goes to stderr, the table to stdout.  Exit code 1 if a workload fails or\n"
            "an element of its fused or eager result is beyond its bound against the\n"
            "reference (kiln check's bound, propagated through the graph).\n");
}

/* ---- the command ---------------------------------------------------------------------- */

int
cmd_bench(int argc, char **argv)
{
    /* what the process paid before this line: the dynamic loader (libLLVM's relocations)
     * and the static constructors (docs/benchmarking.md, "Start-up") */
    bench_opts o = {.scale = 1, .eager = true, .budget = 1.0,
              .preload_ms = cli_clock_ms(CLOCK_PROCESS_CPUTIME_ID)};
    const char **files = calloc((size_t)argc + 1, sizeof *files);
    int nfiles = 0;
    if (!files)
        return cli_fail();
    for (int i = 1; i < argc; i++) {
        const char *v;
        int m;
        if (cli_is_help(argv[i])) {
            cmd_bench_help(stdout);
            free(files);
            return CLI_OK;
        }
        if ((m = cli_option("bench", argc, argv, &i, "--scale", &v)) != 0) {
            if (m < 0 || (o.scale = atof(v)) < 1) {
                free(files);
                return m < 0 ? CLI_USAGE : cli_usage("bench", "--scale needs a number >= 1");
            }
        } else if ((m = cli_option("bench", argc, argv, &i, "--threads", &v)) != 0) {
            if (m < 0 || atoi(v) < 1) {
                free(files);
                return m < 0 ? CLI_USAGE : cli_usage("bench", "--threads needs a number >= 1");
            }
            /* before anything starts the pool */
            setenv("KILN_NUM_THREADS", v, 1);
        } else if ((m = cli_option("bench", argc, argv, &i, "--mode", &v)) != 0) {
            if (m < 0) {
                free(files);
                return CLI_USAGE;
            }
            if (!strcmp(v, "fused"))
                o.eager = false;
            else if (!strcmp(v, "all"))
                o.interp = true;
            else if (strcmp(v, "eager") != 0) {
                free(files);
                return cli_usage("bench", "--mode is fused, eager or all, not '%s'", v);
            }
        } else if ((m = cli_option("bench", argc, argv, &i, "--time", &v)) != 0) {
            if (m < 0 || (o.budget = atof(v)) <= 0) {
                free(files);
                return m < 0 ? CLI_USAGE : cli_usage("bench", "--time needs seconds > 0");
            }
        } else if (!strcmp(argv[i], "--warm")) {
            o.warm = true;
        } else if ((m = cli_option("bench", argc, argv, &i, "--stores", &v)) != 0) {
            if (m < 0) {
                free(files);
                return CLI_USAGE;
            }
            if (!strcmp(v, "stream"))
                o.stores = KILN_STORES_STREAM;
            else if (!strcmp(v, "cached"))
                o.stores = KILN_STORES_CACHED;
            else if (strcmp(v, "auto") != 0) {
                free(files);
                return cli_usage("bench", "--stores is auto, stream or cached, not '%s'", v);
            }
        } else if ((m = cli_option("bench", argc, argv, &i, "--code", &v)) != 0) {
            if (m < 0 || cli_parse_code(v, &o.code)) {
                free(files);
                return m < 0 ? CLI_USAGE
                             : cli_usage("bench", "--code is auto, full or compact, not '%s'", v);
            }
        } else if ((m = cli_option("bench", argc, argv, &i, "--json", &o.json)) != 0) {
            if (m < 0) {
                free(files);
                return CLI_USAGE;
            }
        } else if ((m = cli_option("bench", argc, argv, &i, "--plot", &o.plot)) != 0) {
            if (m < 0) {
                free(files);
                return CLI_USAGE;
            }
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            free(files);
            return cli_usage("bench", "unknown option '%s'", argv[i]);
        } else {
            files[nfiles++] = argv[i];
        }
    }
    int n = nfiles ? nfiles : bench_suite_count;
    bench_result *rs = calloc((size_t)n, sizeof *rs);
    bench_probe pr = {0};
    bench_evictor ev = {0};
    int rc = CLI_OK;
    if (!rs) {
        free(files);
        return cli_fail();
    }
    /* The disk cache is measured in a directory of the run's own ($TMPDIR, else /tmp),
     * removed at the end: a benchmark neither reads nor fills the user's cache. */
    const char *tmpdir = getenv("TMPDIR");
    char cache_dir[4096];
    int cn = snprintf(cache_dir, sizeof cache_dir, "%s/kiln-bench-XXXXXX",
                      tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (cn < 0 || (size_t)cn >= sizeof cache_dir - 16 || !mkdtemp(cache_dir) ||
        setenv("KILN_CACHE_DIR", cache_dir, 1) != 0) {
        fprintf(stderr, "kiln bench: cannot make a temporary cache directory: %s\n",
                strerror(errno));
        free(rs);
        free(files);
        return CLI_FAIL;
    }
    ir_config_reload(); /* the library reads the environment once: these two settings */
    kiln_host_info host = KILN_HOST_INFO_INIT;
    kiln_stats ks = KILN_STATS_INIT;
    kiln_host_info_get(&host);
    kiln_jit_stats(&ks); /* the thread pool's size */
    const kiln_host_info *h = &host;
    fprintf(stderr, "kiln bench: %d workload(s) on %s (%d-bit vectors), %d thread(s); probe...\n",
            n, h->cpu, h->vector_bits, ks.threads);
    if (bench_probe_init(&pr) || (!o.warm && bench_evict_init(&ev))) {
        rc = cli_fail();
        goto done;
    }
    for (int i = 0; i < n; i++) {
        kiln_graph *g = NULL;
        kiln_status st;
        /* a file, or the name of a workload of the built-in suite */
        int w = nfiles ? -1 : i;
        for (int k = 0; nfiles && k < bench_suite_count; k++)
            if (!strcmp(files[i], bench_suite[k].name))
                w = k;
        if (w < 0) {
            st = cli_load_graph(files[i], &g);
            rs[i].name = files[i];
        } else {
            char src[64];
            snprintf(src, sizeof src, "<bench:%s>", bench_suite[w].name);
            st = kiln_graph_parse_named(bench_suite[w].text, bench_suite[w].len, src, &g);
            rs[i].name = bench_suite[w].name;
        }
        if (st) {
            snprintf(rs[i].error, sizeof rs[i].error, "%s", cli_errmsg());
            rc = CLI_FAIL;
            continue;
        }
        g = bench_scaled(g, o.scale);
        bench_one(rs[i].name, g, &o, &pr, &ev, &rs[i]);
        kiln_graph_free(g);
        if (w >= 0 && !strcmp(rs[i].name, "decode")) { /* and its sizes changing every step */
            fprintf(stderr, "kiln bench: decode, sizes changing every step...\n");
            rs[i].steps.run = true;
            bench_decode_steps(&o, &rs[i]);
            if (!rs[i].steps.ok) {
                fprintf(stderr, "kiln bench: decode, sizes changing: %s\n", rs[i].steps.error);
                rc = CLI_FAIL;
            }
        }
        if (!rs[i].ok) {
            fprintf(stderr, "kiln bench: %s: %s\n", rs[i].name, rs[i].error);
            rc = CLI_FAIL;
        }
    }
    kiln_jit_stats(&ks);
    printf("kiln %s bench on %s (%d-bit vectors), %d threads, LLVM %s\n", kiln_version(), h->cpu,
           h->vector_bits, ks.threads, h->llvm_version);
    printf("process start-up before kiln bench ran (loading libLLVM, its static constructors): "
           "%.1f ms of CPU\n",
           o.preload_ms);
    printf("one-time start-up (LLVM + LLJIT): %.1f ms, of it LLJIT %.1f ms; kernels compiled %llu, "
           "cache hits %llu; disk cache: %llu modules loaded, %llu written\n",
           ks.startup_ms, ks.lljit_ms, (unsigned long long)ks.kernel_compiles,
           (unsigned long long)ks.kernel_hits, (unsigned long long)ks.disk_hits,
           (unsigned long long)ks.disk_writes);
    bench_print_table(stdout, rs, n, &o);
    bench_print_probes(stdout, rs, n);
    if (o.warm)
        printf("\ncaches: warm everywhere (--warm): kept between timed runs, so a working set "
               "that fits in the %zu MiB last-level cache (from %s) runs from cache.\n",
               h->llc_bytes >> 20, h->llc_source);
    else
        printf("\ncaches: cold = a buffer of %zu MiB (4x the %zu MiB last-level cache, from %s) "
               "read between timed runs, outside the timing; warm = per-call and compute-bound "
               "matmul workloads, the caches kept between runs.\n",
               ev.words * 8 >> 20, h->llc_bytes >> 20, h->llc_source);
    if (o.stores)
        printf("stores: %s in every workload (--stores).\n",
               o.stores == KILN_STORES_STREAM
                   ? "non-temporal wherever allowed (KILN_STORES_STREAM)"
                   : "ordinary, never non-temporal (KILN_STORES_CACHED)");
    if (o.code)
        printf("code: %s in every workload (--code).\n",
               o.code == KILN_CODE_COMPACT ? "compact (KILN_CODE_COMPACT)"
                                           : "full (KILN_CODE_FULL)");
    printf("GB/s = minimal traffic (inputs + outputs) / median fused time; %%bw = that / the "
           "limit, the best run of the copy, triad and streaming-copy probes around the "
           "workload; %%peak = "
           "GFLOP/s / the FMA probe's best around it; compile = cold (caches bypassed), and in "
           "parentheses from the disk cache (in-memory caches dropped); recapture = recording "
           "the graph again through the capture API and ending the scope (a cache hit; -1: not "
           "replayable).\n");
    if (o.json && bench_write_json(o.json, rs, n, &ks, &o))
        rc = cli_fail();
    if (o.plot && bench_write_svg(o.plot, rs, n))
        rc = cli_fail();
done:
    bench_probe_free(&pr);
    kiln_cache_clear(NULL); /* the entries; the directory keeps kiln's CACHEDIR.TAG */
    char tag[sizeof cache_dir + 16];
    snprintf(tag, sizeof tag, "%s/CACHEDIR.TAG", cache_dir);
    unlink(tag);
    if (rmdir(cache_dir) != 0 && errno != ENOENT)
        fprintf(stderr, "kiln bench: note: cannot remove %s: %s\n", cache_dir, strerror(errno));
    bench_evict_free(&ev);
    free(rs);
    free(files);
    return rc;
}
