/* bench_report.c — `kiln bench`'s report: the table and the probe figures on standard
 * output, every figure as JSON (--json), the bandwidth bars as SVG (--plot).  kiln.h only:
 * it prints what bench_measure.c measured. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "bench_run.h"

static const char *const probe_names[PROBE_KINDS] = {"copy", "triad", "stream_copy", "read"};

/* The fewest runs of any probe kernel. */
static int
probe_min_runs(const bench_probe_figs *f)
{
    int n = f->runs[0];
    for (int i = 1; i < PROBE_KINDS; i++)
        n = f->runs[i] < n ? f->runs[i] : n;
    return n;
}

/* ---- output ---------------------------------------------------------------------------- */

static double
gbs(const bench_result *r, const bench_timing *t)
{
    return t->median > 0 ? r->traffic / t->median * 1e-9 : 0;
}

void
bench_print_table(FILE *f, const bench_result *rs, int n, const bench_opts *o)
{
    fprintf(f, "\n%-12s %-22s %-6s %20s %20s %7s %8s %6s %8s %6s %13s %9s %14s\n", "workload",
            "input", "caches", "fused ms (min-max)", o->eager ? "eager ms (min-max)" : "",
            o->eager ? "f/e" : "", "GB/s", "%bw", "GFLOP/s", "%peak", "compile", "recapture",
            "error f/e");
    fprintf(f, "%-12s %-22s %-6s %20s %20s %7s %8s %6s %8s %6s %13s %9s %14s\n", "", "", "", "", "",
            "", "", "", "", "", "ms (disk)", "us", "");
    for (int i = 0; i < n; i++) {
        const bench_result *r = &rs[i];
        if (!r->fused.runs) {
            fprintf(f, "%-12s FAILED: %s\n", r->name, r->error);
            continue;
        }
        char fm[64], em[64] = "", sp[16] = "", gf[16] = "-", pk[16] = "-", err[48];
        snprintf(fm, sizeof fm, "%.3f (%.3f-%.3f)", r->fused.median * 1e3, r->fused.min * 1e3,
                 r->fused.max * 1e3);
        if (r->have_eager) {
            snprintf(em, sizeof em, "%.3f (%.3f-%.3f)", r->eager.median * 1e3,
                     r->eager.min * 1e3, r->eager.max * 1e3);
            snprintf(sp, sizeof sp, "%.2fx", r->eager.median / r->fused.median);
        }
        if (r->flops > 0)
            snprintf(gf, sizeof gf, "%.1f", r->flops / r->fused.median * 1e-9);
        if (r->flops > 0 && r->peak_gflops > 0)
            snprintf(pk, sizeof pk, "%.0f%%", 100 * r->flops / r->fused.median * 1e-9 / r->peak_gflops);
        if (r->have_eager)
            snprintf(err, sizeof err, "%.3g/%.3g %s", r->err_fused, r->err_eager, r->err_unit);
        else
            snprintf(err, sizeof err, "%.3g %s", r->err_fused, r->err_unit);
        char cm[32];
        snprintf(cm, sizeof cm, "%.2f (%.2f)", r->compile_ms, r->disk_ms);
        fprintf(f, "%-12s %-22s %-6s %20s %20s %7s %8.2f %5.0f%% %8s %6s %13s %9.2f %14s%s\n",
                r->name, r->shape, r->cold ? "cold" : "warm", fm, em, sp, gbs(r, &r->fused),
                r->probe_gbs > 0 ? 100 * gbs(r, &r->fused) / r->probe_gbs : 0, gf, pk, cm,
                r->recapture_us, err, r->ok ? "" : "  <-- FAIL");
        if (!strcmp(r->name, "small") || !strcmp(r->name, "matmul_small"))
            fprintf(f, "%-12s   per call: fused %.2f us\n", "", r->fused.median * 1e6);
        if (r->cold && r->read_share >= 0.9 && r->probe.best_of[PROBE_READ] > 0) {
            fprintf(f, "%-12s   reads: %.0f%% of its traffic is input; %.2f of the read probe's "
                       "best (%.2f GB/s)", "", 100 * r->read_share,
                    gbs(r, &r->fused) / r->probe.best_of[PROBE_READ], r->probe.best_of[PROBE_READ]);
            if (r->paired)
                fprintf(f, "; %.2f of the probe run just before it (median of %d pairs)",
                        r->read_paired, r->paired);
            fputc('\n', f);
        }
        if (r->first_run_ms > 1.2e3 * r->fused.median)
            fprintf(f, "%-12s   first run of a program from the cache: %.3f ms, %.2fx the median\n",
                    "", r->first_run_ms, r->first_run_ms / (r->fused.median * 1e3));
        if (r->peak_gflops > 0)
            fprintf(f, "%-12s   FMA peak probed around it: %.1f GFLOP/s on %s\n", "",
                    r->peak_gflops, r->single ? "1 thread" : "all threads");
        if (r->steps.run && !r->steps.ok)
            fprintf(f, "%-12s   sizes changing every step: FAILED: %s\n", "", r->steps.error);
        else if (r->steps.run)
            fprintf(f, "%-12s   sizes changing every step (caches of %d..%d rows, captured through "
                       "the C API): capture + scope end + plan %.1f us (median; the first step "
                       "%.1f ms), run %.3f ms; after the first step %llu kernels compiled, %llu "
                       "of %d plans made from another size's\n", "", r->steps.t0,
                    r->steps.t0 + r->steps.steps - 1, r->steps.overhead_us, r->steps.first_us / 1e3,
                    r->steps.run_ms, (unsigned long long)r->steps.compiled_after_first,
                    (unsigned long long)r->steps.resized, r->steps.steps - 1);
    }
}

/* The probe's figures per workload: best / median GB/s of each kernel. */
void
bench_print_probes(FILE *f, const bench_result *rs, int n)
{
    fprintf(f, "\nbandwidth probe around each workload, GB/s as STREAM counts bytes, best / median "
               "of the runs (count):\n%-12s %-22s %-22s %7s   %s\n", "workload", "copy", "triad",
            "limit", "streaming copy (non-temporal stores)  read");
    for (int i = 0; i < n; i++) {
        const bench_probe_figs *p = &rs[i].probe;
        if (!rs[i].fused.runs)
            continue;
        char c[PROBE_KINDS][48];
        for (int k = 0; k < PROBE_KINDS; k++)
            snprintf(c[k], sizeof c[k], "%.2f / %.2f (%d)", p->best_of[k], p->median_of[k], p->runs[k]);
        fprintf(f, "%-12s %-22s %-22s %7.2f   %-22s %-22s limit: %s\n", rs[i].name,
                c[PROBE_COPY], c[PROBE_TRIAD], p->best, c[PROBE_NT_COPY], c[PROBE_READ],
                probe_names[p->limit_kind]);
    }
}

static void
json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

/* JSON has no infinity or NaN: an infinite error (an element beyond a zero bound, a NaN
 * where a number was expected) is written as 1e300. */
static double
jfin(double v)
{
    return isfinite(v) ? v : 1e300;
}

static void
json_timing(FILE *f, const char *name, const bench_timing *t)
{
    fprintf(f, "\"%s\": {\"median_s\": %.9g, \"min_s\": %.9g, \"max_s\": %.9g, \"runs\": %d}",
            name, t->median, t->min, t->max, t->runs);
}

kiln_status
bench_write_json(const char *path, const bench_result *rs, int n, const kiln_stats *ks, const bench_opts *o)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return cli_error(KILN_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    kiln_host_info host = KILN_HOST_INFO_INIT;
    kiln_host_info_get(&host);
    const kiln_host_info *h = &host;
    fprintf(f, "{\n  \"kiln_version\": \"%s\",\n  \"machine\": {\"cpu\": ", kiln_version());
    json_str(f, h->cpu);
    fprintf(f, ", \"features\": ");
    json_str(f, h->features);
    fprintf(f, ", \"vector_bits\": %d, \"threads\": %d, \"llvm_version\": \"%s\", "
               "\"llc_bytes\": %zu, \"llc_source\": \"%s\"},\n",
            h->vector_bits, ks->threads, h->llvm_version, h->llc_bytes, h->llc_source);
    fprintf(f, "  \"warm\": %s,\n  \"stores\": \"%s\",\n  \"code\": \"%s\",\n",
            o->warm ? "true" : "false",
            o->stores == KILN_STORES_STREAM ? "stream"
            : o->stores == KILN_STORES_CACHED ? "cached" : "auto",
            o->code == KILN_CODE_COMPACT ? "compact" : o->code == KILN_CODE_FULL ? "full" : "auto");
    fprintf(f,
            "  \"preload_cpu_ms\": %.6g,\n  \"startup_ms\": %.6g,\n  \"lljit_ms\": %.6g,\n"
            "  \"workloads\": [\n",
            o->preload_ms, ks->startup_ms, ks->lljit_ms);
    for (int i = 0; i < n; i++) {
        const bench_result *r = &rs[i];
        fprintf(f, "    {\"name\": ");
        json_str(f, r->name);
        fprintf(f, ", \"input\": ");
        json_str(f, r->shape);
        fprintf(f, ", \"ok\": %s, \"caches\": \"%s\", ", r->ok ? "true" : "false",
                r->cold ? "cold" : "warm");
        if (!r->ok) {
            fprintf(f, "\"error\": ");
            json_str(f, r->error);
            fprintf(f, ", ");
        }
        json_timing(f, "fused", &r->fused);
        if (r->have_eager) {
            fprintf(f, ", ");
            json_timing(f, "eager", &r->eager);
            fprintf(f, ", \"speedup_fused_over_eager\": %.6g", r->eager.median / r->fused.median);
            fprintf(f, ", \"eager_gbs\": %.6g", gbs(r, &r->eager));
            fprintf(f, ", \"error_eager\": %.6g, \"bound_ratio_eager\": %.6g", jfin(r->err_eager),
                    jfin(r->ratio_eager));
        }
        if (r->have_interp) {
            fprintf(f, ", ");
            json_timing(f, "interp", &r->interp);
        }
        fprintf(f, ", \"threads\": %d, \"peak_gflops\": %.6g, \"fraction_of_peak\": %.6g",
                r->single ? 1 : ks->threads, r->peak_gflops,
                r->peak_gflops > 0 && r->fused.median > 0
                    ? r->flops / r->fused.median * 1e-9 / r->peak_gflops
                    : 0);
        const bench_probe_figs *pf = &r->probe;
        fprintf(f,
                ", \"probe_copy_best_gbs\": %.6g, \"probe_copy_median_gbs\": %.6g, "
                "\"probe_triad_best_gbs\": %.6g, \"probe_triad_median_gbs\": %.6g, "
                "\"probe_stream_copy_best_gbs\": %.6g, \"probe_stream_copy_median_gbs\": %.6g, "
                "\"probe_read_best_gbs\": %.6g, \"probe_read_median_gbs\": %.6g, "
                "\"fraction_of_read\": %.6g, \"read_share\": %.6g, "
                "\"fraction_of_read_paired\": %.6g, \"read_pairs\": %d, "
                "\"probe_runs\": %d, \"probe_limit_kind\": \"%s\"",
                pf->best_of[PROBE_COPY], pf->median_of[PROBE_COPY], pf->best_of[PROBE_TRIAD],
                pf->median_of[PROBE_TRIAD], pf->best_of[PROBE_NT_COPY], pf->median_of[PROBE_NT_COPY],
                pf->best_of[PROBE_READ], pf->median_of[PROBE_READ],
                pf->best_of[PROBE_READ] > 0 ? gbs(r, &r->fused) / pf->best_of[PROBE_READ] : 0,
                r->read_share, r->read_paired, r->paired, probe_min_runs(pf),
                probe_names[pf->limit_kind]);
        fprintf(f,
                ", \"minimal_traffic_bytes\": %.17g, \"fused_gbs\": %.6g, \"probe_gbs\": %.6g, "
                "\"fraction_of_bandwidth\": %.6g, \"flops\": %.17g, \"gflops\": %.6g, "
                "\"compile_cold_ms\": %.6g, \"compile_disk_ms\": %.6g, \"compile_cached_us\": %.6g, "
                "\"recapture_us\": %.6g, \"first_run_ms\": %.6g, "
                "\"error_fused\": %.6g, \"error_unit\": \"%s\", \"bound_ratio_fused\": %.6g",
                r->traffic, gbs(r, &r->fused), r->probe_gbs,
                r->probe_gbs > 0 ? gbs(r, &r->fused) / r->probe_gbs : 0, r->flops,
                r->flops > 0 && r->fused.median > 0 ? r->flops / r->fused.median * 1e-9 : 0,
                r->compile_ms, r->disk_ms, r->recompile_us, r->recapture_us, r->first_run_ms,
                jfin(r->err_fused),
                r->err_unit, jfin(r->ratio_fused));
        if (r->steps.run) {
            fprintf(f, ", \"sizes_change\": {\"ok\": %s, ", r->steps.ok ? "true" : "false");
            if (!r->steps.ok) {
                fprintf(f, "\"error\": ");
                json_str(f, r->steps.error);
                fprintf(f, ", ");
            }
            fprintf(f,
                    "\"steps\": %d, \"t0\": %d, \"overhead_us\": %.6g, \"first_step_us\": %.6g, "
                    "\"run_ms\": %.6g, \"kernels_compiled_after_first\": %llu, "
                    "\"plans_resized\": %llu}",
                    r->steps.steps, r->steps.t0, r->steps.overhead_us, r->steps.first_us,
                    r->steps.run_ms, (unsigned long long)r->steps.compiled_after_first,
                    (unsigned long long)r->steps.resized);
        }
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    if (fclose(f) != 0)
        return cli_error(KILN_ERR_IO, "%s: write failed", path);
    return KILN_OK;
}

/* Grouped bars per workload: fused and eager effective bandwidth, with the probe's
 * bandwidth as a line over each group. */
kiln_status
bench_write_svg(const char *path, const bench_result *rs, int n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return cli_error(KILN_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    double top = 1;
    for (int i = 0; i < n; i++) {
        if (rs[i].probe_gbs > top) top = rs[i].probe_gbs;
        if (gbs(&rs[i], &rs[i].fused) > top) top = gbs(&rs[i], &rs[i].fused);
    }
    top *= 1.15;
    int W = 120 * n + 120, H = 400, x0 = 70, y0 = 340, ph = 280;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%d\" y=\"20\" font-size=\"15\">kiln bench: effective bandwidth "
               "(GB/s, minimal traffic / median time)</text>\n", x0);
    for (int k = 0; k <= 4; k++) {
        double v = top * k / 4;
        int y = y0 - (int)(ph * k / 4);
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#ddd\"/>\n", x0, y, W - 20, y);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.0f</text>\n", x0 - 6, y + 4, v);
    }
    for (int i = 0; i < n; i++) {
        const bench_result *r = &rs[i];
        int gx = x0 + 20 + 120 * i;
        double fv = gbs(r, &r->fused), ev = r->have_eager ? gbs(r, &r->eager) : 0;
        int fh = (int)(ph * fv / top), eh = (int)(ph * ev / top), py = y0 - (int)(ph * r->probe_gbs / top);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"40\" height=\"%d\" fill=\"#d9532b\"/>\n", gx, y0 - fh, fh);
        if (r->have_eager)
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"40\" height=\"%d\" fill=\"#7a9cc6\"/>\n", gx + 42, y0 - eh, eh);
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\" stroke-width=\"2\" stroke-dasharray=\"5,3\"/>\n",
                gx - 6, py, gx + 88, py);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", gx + 41, y0 + 18, r->name);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\">%.0f%%</text>\n",
                gx + 20, y0 - fh - 4, r->probe_gbs > 0 ? 100 * fv / r->probe_gbs : 0);
    }
    fprintf(f, "<rect x=\"%d\" y=\"365\" width=\"12\" height=\"12\" fill=\"#d9532b\"/><text x=\"%d\" y=\"376\">fused</text>\n", x0, x0 + 16);
    fprintf(f, "<rect x=\"%d\" y=\"365\" width=\"12\" height=\"12\" fill=\"#7a9cc6\"/><text x=\"%d\" y=\"376\">eager</text>\n", x0 + 70, x0 + 86);
    fprintf(f, "<line x1=\"%d\" y1=\"371\" x2=\"%d\" y2=\"371\" stroke=\"black\" stroke-width=\"2\" stroke-dasharray=\"5,3\"/><text x=\"%d\" y=\"376\">limit: the best copy/triad/streaming-copy probe run (same run)</text>\n",
            x0 + 140, x0 + 170, x0 + 176);
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0)
        return cli_error(KILN_ERR_IO, "%s: write failed", path);
    return KILN_OK;
}
