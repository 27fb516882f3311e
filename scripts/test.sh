#!/usr/bin/env bash
# test.sh — the whole test suite: install what is missing; build in build/ (Release,
# warnings as errors) and run every CTest test; then build in build-asan/ with AddressSanitizer
# and UndefinedBehaviorSanitizer and run them all again; then the capture, handle, cache, JIT
# and reduction suites and the contraction suite's runtime cases under ThreadSanitizer in
# build-tsan/; then the libFuzzer targets, 25 s each on their seed corpus, in build-fuzz/
# (clang-19: skipped with a message where it is not installed, and setup.sh does not install
# it; docs/fuzzing.md).  Exits non-zero if anything fails; every configuration runs even
# when an earlier one has failing tests.
# The Python extension (python/) is built in both configurations for KILN_PYTHON_EXE
# (default /usr/bin/python3, Debian's, which has NumPy and pytest from setup.sh), and CTest
# runs its pytest suite (python/tests) with the others; under ASan the sanitizer runtime is
# preloaded into the interpreter (python/CMakeLists.txt).
# KILN_BUILD_DIR and KILN_ASAN_BUILD_DIR override the two build directories, KILN_BUILD_TYPE
# the first one's CMake build type (Release: the same build/ as scripts/run.sh);
# KILN_FUZZ_BUILD_DIR and KILN_FUZZ_SECONDS (per target) the fuzzing step's.
#
# --quick: the edit loop's tier, under 3 minutes on 2 cores: the Release build and every
# CTest test with KILN_QUICK=1, which the slow sweeps honour by running a fraction of their
# cases (the vector-math sweeps 1/16 of their samples and 3 of their 7 lane widths, the
# random-graph tests of check_jit and check_reduce a fifth of their graphs,
# check_llvm_sweep every fifth pair alone, bench_smoke four workloads); no sanitizers, no
# fuzzing.  CI runs the full suite.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=
case "${1:-}" in
--quick) quick=1 ;;
"") ;;
*) echo "usage: bash scripts/test.sh [--quick]" >&2; exit 2 ;;
esac
build=${KILN_BUILD_DIR:-build}
asan=${KILN_ASAN_BUILD_DIR:-build-asan}
type=${KILN_BUILD_TYPE:-Release}
jobs=$(nproc)
bash scripts/setup.sh
python_exe=${KILN_PYTHON_EXE:-/usr/bin/python3}
python_args=()
if [ -x "$python_exe" ]; then
    python_args=(-DPython3_EXECUTABLE="$python_exe")
fi

if [ -n "$quick" ]; then
    start=$(date +%s)
    echo "== $build: Release, -Werror, KILN_QUICK=1 (the quick tier)"
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKILN_WERROR=ON
    cmake --build "$build" -j"$jobs"
    status=0
    (cd "$build" && KILN_QUICK=1 ctest --output-on-failure -j"$jobs") || status=1
    if [ "$status" = 0 ]; then
        echo "test.sh --quick: all tests passed in $(($(date +%s) - start)) s (Release, shortened sweeps; the full run: bash scripts/test.sh)"
    else
        echo "test.sh --quick: FAILED (see the output above)" >&2
    fi
    exit "$status"
fi

status=0
echo "== $build: $type, -Werror"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="$type" -DKILN_WERROR=ON "${python_args[@]}"
cmake --build "$build" -j"$jobs"
(cd "$build" && ctest --output-on-failure -j"$jobs") || status=1

echo "== $asan: AddressSanitizer + UndefinedBehaviorSanitizer, -Werror"
cmake -S . -B "$asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_WERROR=ON \
    -DKILN_SANITIZE=address,undefined "${python_args[@]}"
cmake --build "$asan" -j"$jobs"
export ASAN_OPTIONS=detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd "$asan" && ctest --output-on-failure -j"$jobs") || status=1

# The capture suite's concurrency tests (two threads, two devices; racing begins), the
# handle suite's (racing frees; lock-free lookups while the live-handle sets grow) and the
# cache suite's (threads compiling the same keys at once; processes filling the same disk
# entries) under ThreadSanitizer.  And the JIT and reduction suites whole: every kernel
# kind they compile runs on the pool (rows and chunks split across threads, 1- vs
# N-thread children, programs shared by threads).  On 2 cores these two take about 2
# minutes and 70 s under TSan (the other three suites together about 35 s).
tsan=${KILN_TSAN_BUILD_DIR:-build-tsan}
echo "== $tsan: ThreadSanitizer, check_capture, check_handles, check_cache, check_jit, check_reduce and check_contract's runtime cases"
cmake -S . -B "$tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_WERROR=ON -DKILN_SANITIZE=thread
cmake --build "$tsan" -j"$jobs" \
    --target check_capture check_handles check_cache check_jit check_reduce check_contract
# libLLVM is not instrumented: its races are suppressed (tests/tsan.supp says why).
tsan_options="halt_on_error=1 suppressions=$PWD/tests/tsan.supp"
(cd "$tsan" && TSAN_OPTIONS=$tsan_options \
    ctest --output-on-failure -R '^check_(capture|handles|cache|jit|reduce)$') || status=1
# The contraction suite's runtime cases (matmul packing and blocks on the pool, in child
# processes of 1, 2 and 4 threads; constant weights packed at compile time).
(cd "$tsan" && TSAN_OPTIONS=$tsan_options CK_RUN_CASE=runtime \
    ctest --output-on-failure -R '^check_contract$') || status=1

# The libFuzzer targets (parse + compile + run; the .npy reader) for a bounded time each.
bash tests/fuzz/run.sh "${KILN_FUZZ_BUILD_DIR:-build-fuzz}" "${KILN_FUZZ_SECONDS:-25}" || status=1

if [ "$status" = 0 ]; then
    echo "test.sh: all tests passed (Release, ASan+UBSan, TSan, fuzzing)"
else
    echo "test.sh: FAILED (see the output above)" >&2
fi
exit "$status"
