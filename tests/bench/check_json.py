#!/usr/bin/env python3
"""Validate `kiln bench --json` output: every field present, numbers positive and finite,
errors within their bounds.  Timing values are checked for sanity only (no thresholds:
the machines are shared and noisy)."""
import json
import math
import sys

doc = json.load(open(sys.argv[1]))
expected = sys.argv[2].split(",")
problems = []


def need(obj, key, where):
    if key not in obj:
        problems.append(f"{where}: missing '{key}'")
        return None
    return obj[key]


def positive(v, where):
    if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        problems.append(f"{where}: expected a positive number, got {v!r}")


for key in ("kiln_version", "machine", "preload_cpu_ms", "startup_ms", "lljit_ms", "warm", "stores",
            "code", "workloads"):
    need(doc, key, "top level")
positive(doc.get("preload_cpu_ms", 0), "preload_cpu_ms")
positive(doc.get("startup_ms", 0), "startup_ms")
positive(doc.get("lljit_ms", 0), "lljit_ms")
warm = doc.get("warm")
if doc.get("stores") not in ("auto", "stream", "cached"):
    problems.append(f"top level: stores is {doc.get('stores')!r}")
if doc.get("code") not in ("auto", "full", "compact"):
    problems.append(f"top level: code is {doc.get('code')!r}")
if warm not in (True, False):
    problems.append(f"top level: warm is {warm!r}, not a boolean")
m = doc.get("machine", {})
for key in ("cpu", "features", "vector_bits", "threads", "llvm_version", "llc_bytes", "llc_source"):
    need(m, key, "machine")
positive(m.get("threads", 0), "machine.threads")
positive(m.get("vector_bits", 0), "machine.vector_bits")
positive(m.get("llc_bytes", 0), "machine.llc_bytes")
if m.get("llc_source") not in ("sysfs", "sysconf", "default"):
    problems.append(f"machine.llc_source: {m.get('llc_source')!r}")
names = [w.get("name") for w in doc.get("workloads", [])]
if names != expected:
    problems.append(f"workloads {names} != {expected}")
for w in doc.get("workloads", []):
    where = f"workload {w.get('name')}"
    if not w.get("ok"):
        problems.append(f"{where}: not ok: {w.get('error')}")
    for mode in ("fused", "eager"):
        t = need(w, mode, where)
        if t:
            for key in ("median_s", "min_s", "max_s", "runs"):
                positive(t.get(key, 0), f"{where}.{mode}.{key}")
            if t.get("min_s", 0) > t.get("median_s", 0) or t.get("median_s", 0) > t.get("max_s", 0):
                problems.append(f"{where}.{mode}: min <= median <= max violated")
    for key in ("speedup_fused_over_eager", "minimal_traffic_bytes", "fused_gbs", "eager_gbs",
                "probe_gbs", "fraction_of_bandwidth", "compile_cold_ms", "compile_disk_ms",
                "compile_cached_us", "recapture_us", "probe_copy_best_gbs", "probe_copy_median_gbs",
                "probe_triad_best_gbs", "probe_triad_median_gbs", "probe_stream_copy_best_gbs",
                "probe_stream_copy_median_gbs", "probe_read_best_gbs", "probe_read_median_gbs",
                "fraction_of_read", "read_share", "probe_runs"):
        positive(need(w, key, where), f"{where}.{key}")
    # the limit is the best run of copy, triad, the streaming copy and the read (the best the
    # machine can do), and probe_limit_kind names it; a best run is never slower than the median
    kinds = ("copy", "triad", "stream_copy", "read")
    pb = [w.get(f"probe_{k}_best_gbs", 0) for k in kinds]
    if w.get("probe_gbs") != max(pb):
        problems.append(f"{where}: probe_gbs {w.get('probe_gbs')} is not the best of copy, triad, "
                        f"the streaming copy and the read {pb}")
    lk = need(w, "probe_limit_kind", where)
    if lk not in kinds or w.get(f"probe_{lk}_best_gbs") != w.get("probe_gbs"):
        problems.append(f"{where}: probe_limit_kind {lk!r} does not name the limit's kernel")
    for kind in kinds:
        if w.get(f"probe_{kind}_best_gbs", 0) < w.get(f"probe_{kind}_median_gbs", 0):
            problems.append(f"{where}: probe {kind}: best below median")
    if w.get("probe_runs", 0) < 5:
        problems.append(f"{where}: probe_runs {w.get('probe_runs')} < 5")
    if "fraction_of_bandwidth" in w and "probe_gbs" in w and "fused_gbs" in w and w["probe_gbs"] > 0:
        if abs(w["fraction_of_bandwidth"] - w["fused_gbs"] / w["probe_gbs"]) > 1e-4 * w["fraction_of_bandwidth"]:
            problems.append(f"{where}: fraction_of_bandwidth is not fused_gbs / probe_gbs")
    if w.get("probe_read_best_gbs", 0) > 0 and "fused_gbs" in w:
        if abs(w["fraction_of_read"] - w["fused_gbs"] / w["probe_read_best_gbs"]) > 1e-4 * w["fraction_of_read"]:
            problems.append(f"{where}: fraction_of_read is not fused_gbs / probe_read_best_gbs")
    # a cold workload that only reads is also measured in pairs with the read probe (each run
    # of it right after a run of the probe): the median of its GB/s over its pair's
    for key in ("fraction_of_read_paired", "read_pairs"):
        need(w, key, where)
    if w.get("caches") == "cold" and w.get("read_share", 0) >= 0.9:
        positive(w.get("fraction_of_read_paired", 0), f"{where}.fraction_of_read_paired")
        if w.get("read_pairs", 0) < 5:
            problems.append(f"{where}: read_pairs {w.get('read_pairs')} < 5")
    elif w.get("read_pairs", 0) != 0:
        problems.append(f"{where}: read_pairs {w.get('read_pairs')} for a workload that is not "
                        "a cold read")
    # memory-bound workloads run from evicted caches unless --warm; small (per call) and
    # the compute-bound matmuls (more than 4 flops per byte: GFLOP/s) warm.  Scaled down,
    # mlp is a one-row matmul (x [1,1024] at --scale 256), memory-bound like gemv.
    caches = w.get("caches")
    compute_bound = w.get("flops", 0) > 4 * w.get("minimal_traffic_bytes", math.inf)
    expect = "warm" if warm or w.get("name") in ("small", "matmul_small") or compute_bound else "cold"
    if caches != expect:
        problems.append(f"{where}: caches {caches!r}, expected {expect!r}")
    for key in ("flops", "gflops", "error_fused", "error_eager", "error_unit",
                "bound_ratio_fused", "bound_ratio_eager"):
        need(w, key, where)
    for key in ("threads", "peak_gflops", "fraction_of_peak"):
        need(w, key, where)
    positive(w.get("threads", 0), f"{where}.threads")
    if w.get("name") in ("mlp", "sgemm", "sgemm_1t", "attn", "matmul_small"):
        for key in ("flops", "gflops", "peak_gflops", "fraction_of_peak"):
            positive(w.get(key, 0), f"{where}.{key}")
    if w.get("name", "").endswith("_1t") and w.get("threads") != 1:
        problems.append(f"{where}: a _1t workload ran on {w.get('threads')} threads")
    # decode, and only decode, also ran with sizes that change every step: the per-step
    # overhead and the run positive, nothing compiled after the first step (the kernels are
    # size-free), every plan after the first made from another size's plan
    sc = w.get("sizes_change")
    if (sc is not None) != (w.get("name") == "decode"):
        problems.append(f"{where}: sizes_change {'present' if sc else 'missing'}")
    if sc is not None:
        if not sc.get("ok"):
            problems.append(f"{where}.sizes_change: not ok: {sc.get('error')}")
        for key in ("steps", "t0", "overhead_us", "first_step_us", "run_ms"):
            positive(need(sc, key, f"{where}.sizes_change"), f"{where}.sizes_change.{key}")
        if sc.get("kernels_compiled_after_first") != 0:
            problems.append(f"{where}.sizes_change: {sc.get('kernels_compiled_after_first')} "
                            "kernels compiled after the first step")
        if sc.get("plans_resized") != sc.get("steps", 0) - 1:
            problems.append(f"{where}.sizes_change: {sc.get('plans_resized')} of "
                            f"{sc.get('steps', 0) - 1} plans made from another size's")
    # the verdict: every element within kiln check's propagated bound
    for key in ("bound_ratio_fused", "bound_ratio_eager"):
        if key in w and not (0 <= w[key] <= 1):
            problems.append(f"{where}: {key} {w[key]}: an element beyond its bound")

if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"bench JSON ok: {len(names)} workloads")
