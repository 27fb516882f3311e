#!/usr/bin/env bash
# run.sh — build kiln's libFuzzer targets with clang and run each on its seed corpus for a
# bounded time.   usage: tests/fuzz/run.sh [BUILD_DIR [SECONDS_PER_TARGET [TARGET ...]]]
# Defaults: build-fuzz, 25 seconds, every target (fuzz_parse_run fuzz_npy fuzz_graphs).  Exit 0 when no
# target found anything (or when clang with libFuzzer is not installed: then it says so and
# skips), 1 when one did; the input that triggered it is kept as BUILD_DIR/artifacts/*.
# KILN_FUZZ_CC names the compiler (default clang-19); KILN_FUZZ_JOBS the parallel build;
# KILN_FUZZ_SANITIZE the sanitizers (default address,undefined; "undefined" alone is the
# throughput flavour, in a BUILD_DIR of its own: docs/fuzzing.md, "Throughput").
# New inputs the fuzzer finds go to BUILD_DIR/corpus/TARGET, never into the seed corpus
# (tests/fuzz/corpus/parse_run: .kiln text; tests/fuzz/corpus/npy: .npy images, named
# without the extension, which .gitignore keeps out of the repository;
# tests/fuzz/corpus/graphs: generator parameters, and .kiln graphs).
# Longer runs and more options: docs/fuzzing.md.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-build-fuzz}
secs=${2:-25}
shift $(( $# > 2 ? 2 : $# ))
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_parse_run fuzz_npy fuzz_graphs)
cc=${KILN_FUZZ_CC:-clang-19}
san=${KILN_FUZZ_SANITIZE:-address,undefined}

if ! command -v "$cc" >/dev/null 2>&1; then
    echo "fuzz: skipped: $cc is not installed (Debian: apt-get install clang-19 libclang-rt-19-dev)"
    exit 0
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$probe/p.c"
if ! "$cc" -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" >/dev/null 2>&1; then
    echo "fuzz: skipped: $cc cannot link -fsanitize=fuzzer (Debian: apt-get install libclang-rt-19-dev)"
    exit 0
fi

echo "== $build: libFuzzer targets ($cc, -fsanitize=$san)"
CC=$cc cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_FUZZ=ON \
    -DKILN_SANITIZE="$san" >"$build.configure.log" 2>&1 \
    || { cat "$build.configure.log"; echo "fuzz: configure failed" >&2; exit 1; }
cmake --build "$build" -j"${KILN_FUZZ_JOBS:-$(nproc)}" --target "${targets[@]}" >"$build.build.log" 2>&1 \
    || { tail -40 "$build.build.log"; echo "fuzz: build failed" >&2; exit 1; }

status=0
mkdir -p "$build/artifacts"
for t in "${targets[@]}"; do
    seeds=$here/corpus/${t#fuzz_}
    mkdir -p "$build/corpus/$t"
    echo "fuzz: $t for ${secs}s on $seeds"
    # -seed: the same mutations every run; -timeout: a compile slower than that is a finding
    if ! ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
         UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
         "$build/tests/fuzz/$t" -seed=1 -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 \
            -max_len=4096 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" \
            "$build/corpus/$t" "$seeds" >"$build/$t.log" 2>&1; then
        tail -60 "$build/$t.log"
        echo "fuzz: FAIL: $t found a problem (input kept in $build/artifacts/)" >&2
        status=1
    else
        grep -E "stat::number_of_executed_units|stat::peak_rss_mb|^fuzz_graphs: [0-9]" "$build/$t.log" | sed "s/^$t: //; s/^/fuzz: $t: /"
    fi
done
exit $status
