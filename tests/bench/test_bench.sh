#!/usr/bin/env bash
# The benchmark end to end at a reduced scale (a smoke test: every figure present, positive
# and within its error bound — no timing thresholds), and `kiln check` catching a
# deliberately wrong kernel.   usage: test_bench.sh KILN_BINARY SOURCE_DIR
# KILN_QUICK=1 (scripts/test.sh --quick): four workloads instead of the suite, kiln check on
# those, and 1/16 of the --ulp samples; every check below still runs.
set -u
kiln=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
quick=${KILN_QUICK:-0}
[ "$quick" = 0 ] && quick=
workloads="chain gelu softmax layernorm bcast l2norm small mlp colsum rmsnorm logsumexp sgemm sgemm_1t attn matmul_small gemv decode"
checked=("$src"/bench/*.kiln "$src"/tests/golden/*.kiln)
samples=262144
only=() # the built-in suite's workloads by name (none: all of them)
if [ -n "$quick" ]; then
    workloads="chain softmax small sgemm"
    only=($workloads)
    checked=("$src"/bench/{chain,softmax,small,sgemm}.kiln "$src"/tests/golden/{binary,reduce}.kiln)
    samples=16384
fi

# 1. the whole suite, small; its temporary disk cache (under TMPDIR) removed at the end
mkdir "$tmp/tmpdir"
if ! TMPDIR="$tmp/tmpdir" "$kiln" bench "${only[@]}" --scale 256 --time 0.02 --json "$tmp/bench.json" --plot "$tmp/bench.svg" \
        >"$tmp/bench.out" 2>"$tmp/bench.err"; then
    echo "FAIL: kiln bench exited non-zero"; cat "$tmp/bench.out" "$tmp/bench.err"; fail=1
fi
[ -z "$(ls -A "$tmp/tmpdir")" ] || { echo "FAIL: kiln bench left $(ls "$tmp/tmpdir") in TMPDIR"; fail=1; }
for w in $workloads; do
    grep -q "^$w " "$tmp/bench.out" || { echo "FAIL: table lacks $w"; fail=1; }
done
grep -q "<svg" "$tmp/bench.svg" && grep -q "chain" "$tmp/bench.svg" || { echo "FAIL: no plot"; fail=1; }
if command -v python3 >/dev/null; then
    python3 "$src/tests/bench/check_json.py" "$tmp/bench.json" "${workloads// /,}" || fail=1
else
    echo "note: python3 absent, JSON fields not validated"
    grep -q '"fraction_of_bandwidth"' "$tmp/bench.json" || { echo "FAIL: JSON"; fail=1; }
fi

# 2. kiln check passes on honest kernels — every graph of the suite and every golden file:
#    the bound is propagated through sums and matmul (issue 10) — and catches perturbed ones
#    (KILN_TEST_PERTURB=op flips the last bit of every result of op)
for g in "${checked[@]}"; do
    "$kiln" check "$g" --seeds 1 >"$tmp/check.out" 2>&1 \
        || { echo "FAIL: kiln check $g on honest kernels"; cat "$tmp/check.out"; fail=1; }
done
for pert in "mul bench/chain.kiln" "add bench/layernorm.kiln" "add tests/golden/binary.kiln"; do
    set -- $pert
    if KILN_TEST_PERTURB=$1 "$kiln" check "$src/$2" --seeds 1 >"$tmp/pert.out" 2>&1; then
        echo "FAIL: kiln check $2 did not catch a kernel whose $1 is off by one ulp"; cat "$tmp/pert.out"; fail=1
    fi
    grep -q "FAIL: beyond the bound" "$tmp/pert.out" || { echo "FAIL: no FAIL line for the perturbed $1 in $2"; fail=1; }
done
# 3. kiln check --ulp: every function within its bound in both dtypes, measured in ULPs of
#    the dtype against the exact value, and each perturbed function caught
for dt in f32 f64; do
    for f in exp exp2 expm1 log log2 log1p tanh sigmoid silu gelu erf gelu_erf sin cos tan pow atan2 sqrt rsqrt recip floor; do
        "$kiln" check --ulp $f --dtype $dt --samples $samples >"$tmp/ulp.out" 2>&1 \
            || { echo "FAIL: kiln check --ulp $f --dtype $dt"; cat "$tmp/ulp.out"; fail=1; }
        grep -q "^$f $dt: .* max error" "$tmp/ulp.out" || { echo "FAIL: --ulp $f $dt output"; cat "$tmp/ulp.out"; fail=1; }
        if KILN_TEST_PERTURB=$f "$kiln" check --ulp $f --dtype $dt --samples 4096 >"$tmp/ulp.out" 2>&1; then
            echo "FAIL: kiln check --ulp $f --dtype $dt did not catch a perturbed $f"; cat "$tmp/ulp.out"; fail=1
        fi
    done
done
# 4. --warm: the caches are kept and every workload says so (table and JSON); and
# --code compact: compact code, within the same error bounds
if ! "$kiln" bench "$src/bench/chain.kiln" "$src/bench/small.kiln" --warm --stores stream --code compact --scale 256 --time 0.02 \
        --json "$tmp/warm.json" >"$tmp/warm.out" 2>"$tmp/warm.err"; then
    echo "FAIL: kiln bench --warm exited non-zero"; cat "$tmp/warm.out" "$tmp/warm.err"; fail=1
fi
grep -qE '^[^ ]+chain.kiln +[^ ]+ +warm ' "$tmp/warm.out" && ! grep -qE '^[^ ]+ +[^ ]+ +cold ' "$tmp/warm.out" \
    || { echo "FAIL: --warm table not labelled warm"; cat "$tmp/warm.out"; fail=1; }
grep -q "^caches: warm everywhere (--warm)" "$tmp/warm.out" || { echo "FAIL: --warm footnote"; fail=1; }
grep -q '"stores": "stream"' "$tmp/warm.json" && grep -q '"stores": "auto"' "$tmp/bench.json" \
    || { echo "FAIL: JSON stores"; fail=1; }
grep -q '"code": "compact"' "$tmp/warm.json" && grep -q '"code": "auto"' "$tmp/bench.json" \
    && grep -q "^code: compact (KILN_CODE_COMPACT) in every workload" "$tmp/warm.out" \
    || { echo "FAIL: --code compact not in the JSON or the table"; fail=1; }
grep -qE '^chain +[^ ]+ +cold ' "$tmp/bench.out" && grep -qE '^small +[^ ]+ +warm ' "$tmp/bench.out" \
    || { echo "FAIL: chain not run from cold caches, or small not warm"; fail=1; }
if command -v python3 >/dev/null; then
    python3 "$src/tests/bench/check_json.py" "$tmp/warm.json" \
        "$src/bench/chain.kiln,$src/bench/small.kiln" || fail=1
fi
# 5. the verdict is kiln check's propagated bound: tanh(x) - x cancels (thousands of ULPs
# of the result for tanh's 1 ULP), which an elementwise ULP bound would call a failure
printf 'graph cancel(x: f32[65536]) -> (y: f32[65536]) {\n  t = tanh(x)\n  y = sub(t, x)\n}\n' >"$tmp/cancel.kiln"
if ! "$kiln" bench "$tmp/cancel.kiln" --scale 1 --time 0.02 --json "$tmp/cancel.json" >"$tmp/cancel.out" 2>&1; then
    echo "FAIL: kiln bench of a cancelling graph exited non-zero"; cat "$tmp/cancel.out"; fail=1
fi
if command -v python3 >/dev/null; then
    python3 - "$tmp/cancel.json" <<'PY' || { echo "FAIL: cancelling graph JSON"; fail=1; }
import json, sys
w = json.load(open(sys.argv[1]))["workloads"][0]
assert w["ok"] and w["error_fused"] > 2 and 0 <= w["bound_ratio_fused"] <= 1, w
PY
fi
# usage errors exit 2
"$kiln" bench --mode nonsense >/dev/null 2>&1; [ $? -eq 2 ] || { echo "FAIL: bench usage exit code"; fail=1; }
"$kiln" bench --stores nonsense >/dev/null 2>&1; [ $? -eq 2 ] || { echo "FAIL: bench --stores usage exit code"; fail=1; }
"$kiln" bench --code nonsense >/dev/null 2>&1; [ $? -eq 2 ] || { echo "FAIL: bench --code usage exit code"; fail=1; }
"$kiln" dump "$src/bench/chain.kiln" --plan --code nonsense >/dev/null 2>&1; [ $? -eq 2 ] || { echo "FAIL: dump --code usage exit code"; fail=1; }
"$kiln" dump "$src/bench/chain.kiln" --plan --code compact | grep -q "^compact code: " \
    && ! "$kiln" dump "$src/bench/chain.kiln" --plan | grep -q "^compact code: " \
    || { echo "FAIL: dump --plan --code compact does not say compact code (or auto does)"; fail=1; }
"$kiln" check >/dev/null 2>&1; [ $? -eq 2 ] || { echo "FAIL: check usage exit code"; fail=1; }

[ $fail -eq 0 ] && echo "bench and check: ok"
exit $fail
