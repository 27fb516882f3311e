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


for key in ("kiln_version", "machine", "startup_ms", "lljit_ms", "workloads"):
    need(doc, key, "top level")
positive(doc.get("startup_ms", 0), "startup_ms")
positive(doc.get("lljit_ms", 0), "lljit_ms")
m = doc.get("machine", {})
for key in ("cpu", "features", "vector_bits", "threads", "llvm_version"):
    need(m, key, "machine")
positive(m.get("threads", 0), "machine.threads")
positive(m.get("vector_bits", 0), "machine.vector_bits")
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
                "compile_cached_us",
                "recapture_us"):
        positive(need(w, key, where), f"{where}.{key}")
    for key in ("flops", "gflops", "error_fused", "error_eager", "error_bound", "error_unit"):
        need(w, key, where)
    for key in ("threads", "peak_gflops", "fraction_of_peak"):
        need(w, key, where)
    positive(w.get("threads", 0), f"{where}.threads")
    if w.get("name") in ("mlp", "sgemm", "sgemm_1t", "attn", "matmul_small"):
        for key in ("flops", "gflops", "peak_gflops", "fraction_of_peak"):
            positive(w.get(key, 0), f"{where}.{key}")
    if w.get("name", "").endswith("_1t") and w.get("threads") != 1:
        problems.append(f"{where}: a _1t workload ran on {w.get('threads')} threads")
    for key in ("error_fused", "error_eager"):
        if key in w and "error_bound" in w and not (w[key] <= w["error_bound"]):
            problems.append(f"{where}: {key} {w[key]} above bound {w['error_bound']}")

if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"bench JSON ok: {len(names)} workloads")
