#!/usr/bin/env bash
# The wide-graph compile benchmark (issue 10; docs/benchmarking.md, "Wide graphs"): cold
# compile time of wide, shallow elementwise graphs of 1,250, 2,500 and 5,000 nodes
# (wide_graph.py), fused and eager, and the fused time per node at 5,000 nodes against
# 1,250; then fused again with full code forced (--code full: what the plan's compact code,
# chosen by size, saves; docs/jit.md, "Compact code").  Timing only, no thresholds: CTest
# does not run it.
#   usage: wide_bench.sh [BUILD_DIR [RUNS]]     (default: build, 3 runs per mode, median)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
runs=${2:-3}
tool=$build/tests/compile_time
[ -x "$tool" ] || { echo "wide_bench.sh: $tool missing: build the compile_time target" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in 1250 2500 5000; do
    python3 "$here/wide_graph.py" "$n" -o "$tmp/wide$n.kiln"
done
(cd "$tmp" && KILN_CACHE_DIR=off "$tool" --runs "$runs" wide1250.kiln wide2500.kiln wide5000.kiln) |
    tee "$tmp/out"
awk '$3 == "fused" && $1 == "wide1250.kiln" { a = $NF }
     $3 == "fused" && $1 == "wide5000.kiln" { b = $NF }
     END { if (a > 0) printf "fused time per node, 5000 nodes / 1250 nodes: %.2f\n", b / a }' "$tmp/out"
echo "full code (--code full), fused:"
(cd "$tmp" && KILN_CACHE_DIR=off "$tool" --runs "$runs" --mode fused --code full wide1250.kiln wide2500.kiln wide5000.kiln)
