#!/usr/bin/env bash
# same_code.sh REV [REV2] — does a change keep the generated code?  Builds the kiln command
# at REV and at REV2 (default HEAD), each from a temporary git worktree into a build
# directory of its own (Release), and compares `kiln dump --plan` and `kiln dump --asm` for
# every graph of bench/ and tests/golden/ (the union of both revisions' files) in four
# variants: fused, eager (--mode eager), compact code (--code compact) and 256-bit vectors
# (KILN_TEST_VECTOR_BITS=256, the width of a host without AVX-512; the variant equals
# "fused" on a host whose vectors are 256 bits or narrower, and the summary says so).
# Commits are compared, not the working tree.  Exits 0 when every dump is the same, 1 when any differs (the first lines of each
# difference are printed, the whole dumps kept), 2 on a usage or build error.
#
# What legitimately differs between two builds is normalised before comparing: kernel
# symbol names (kiln_u<serial>_<i> for kernels compiled past the caches, as dumps are;
# kiln_<hash>_<i> named after a batch's cache key, which holds kiln's version) and the
# module names derived from them.  Everything else is compared as printed: the plan's
# text, the assembly's instructions, constants and labels.  Each dump runs in a fresh
# process with KILN_CACHE_DIR=off and KILN_NUM_THREADS=2 (the plan may depend on the
# thread count), so neither side sees the other's cache.
#
# Builds are kept by commit in $KILN_SAME_CODE_CACHE (default ${TMPDIR:-/tmp}/kiln-same-code),
# so running it again for the next commit builds only the new one; the dumps go to
# $KILN_SAME_CODE_OUT (default a new temporary directory, printed).  KILN_SAME_CODE_JOBS:
# build jobs (default 2).  docs/jit.md, "Same code", has the workflow.
set -euo pipefail
usage() {
    echo "usage: scripts/same_code.sh REV [REV2]   (REV2 defaults to HEAD)" >&2
    exit 2
}
[ $# -ge 1 ] && [ $# -le 2 ] || usage
case "$1" in -h | --help) usage ;; esac
root=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
cd "$root"
rev_a=$(git rev-parse --verify -q "$1^{commit}") || { echo "same_code.sh: unknown revision '$1'" >&2; exit 2; }
rev_b=$(git rev-parse --verify -q "${2:-HEAD}^{commit}") || { echo "same_code.sh: unknown revision '${2:-HEAD}'" >&2; exit 2; }
cache=${KILN_SAME_CODE_CACHE:-${TMPDIR:-/tmp}/kiln-same-code}
out=${KILN_SAME_CODE_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/same-code.XXXXXX")}
jobs=${KILN_SAME_CODE_JOBS:-2}
mkdir -p "$cache" "$out"

# build SHA: the kiln command at commit SHA in $cache/SHA/build (once).
build() {
    local sha=$1 dir=$cache/$1
    if [ -x "$dir/build/kiln" ]; then
        echo "same_code.sh: ${sha:0:12}: using the build in $dir/build" >&2
        return 0
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    git worktree add -q --detach "$dir/src" "$sha"
    # an interrupted build leaves no worktree behind
    trap 'git worktree remove --force "'"$dir"'/src" 2>/dev/null || true' EXIT
    echo "same_code.sh: ${sha:0:12}: building in $dir/build" >&2
    local ok=0
    if cmake -S "$dir/src" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release >"$dir/build.log" 2>&1 &&
        cmake --build "$dir/build" -j"$jobs" --target kiln_tool >>"$dir/build.log" 2>&1; then
        ok=1
    fi
    # the graphs, for the union of both revisions' files; the sources are not needed after
    mkdir -p "$dir/graphs"
    for d in bench tests/golden; do
        [ -d "$dir/src/$d" ] && mkdir -p "$dir/graphs/$d" && cp "$dir/src/$d"/*.kiln "$dir/graphs/$d/" 2>/dev/null || true
    done
    git worktree remove --force "$dir/src"
    trap - EXIT
    if [ "$ok" = 0 ] || [ ! -x "$dir/build/kiln" ]; then
        echo "same_code.sh: ${sha:0:12}: build failed (log: $dir/build.log)" >&2
        rm -rf "$dir/build"
        return 1
    fi
}
build "$rev_a" || exit 2
build "$rev_b" || exit 2

# The graphs: every .kiln of bench/ and tests/golden/ at either revision (a graph one side
# lacks is still dumped by both kilns, from whichever side has it).
mapfile -t graphs < <(cd "$cache" && for s in "$rev_a" "$rev_b"; do
    (cd "$s/graphs" && find . -name '*.kiln' | sed 's|^\./||'); done | sort -u)
[ "${#graphs[@]}" -gt 0 ] || { echo "same_code.sh: no graphs found" >&2; exit 2; }

# Does the host have vectors wider than 256 bits?  (AVX-512: the 256-bit variant differs
# from fused; otherwise it is the same code and is still compared.)
wide=no
grep -qw avx512f /proc/cpuinfo 2>/dev/null && wide=yes

normalise() {
    sed -E -e 's/kiln_u[0-9]+_/kiln_u#_/g' -e 's/kiln_[0-9a-f]{8,}_/kiln_#_/g'
}

# dump SIDE SHA GRAPH VARIANT: GRAPH's plan and asm by SHA's kiln into $out/SIDE/...
dump() {
    local side=$1 sha=$2 g=$3 v=$4 src args=() env=()
    src=$cache/$rev_b/graphs/$g
    [ -f "$src" ] || src=$cache/$rev_a/graphs/$g
    case "$v" in
    fused) ;;
    eager) args=(--mode eager) ;;
    compact) args=(--code compact) ;;
    v256) env=(KILN_TEST_VECTOR_BITS=256) ;;
    esac
    local base=$out/$side/${g%.kiln}.$v
    mkdir -p "$(dirname "$base")"
    for view in plan asm; do
        # a failing dump is compared too: its status and message are the output
        env KILN_CACHE_DIR=off KILN_NUM_THREADS=2 "${env[@]}" \
            "$cache/$sha/build/kiln" dump "$src" "--$view" "${args[@]}" 2>&1 |
            normalise >"$base.$view" || true
        echo "exit status: ${PIPESTATUS[0]}" >>"$base.$view"
    done
}

variants=(fused eager compact v256)
ndiff=0
ndumps=0
declare -a differ=()
for g in "${graphs[@]}"; do
    for v in "${variants[@]}"; do
        dump a "$rev_a" "$g" "$v"
        dump b "$rev_b" "$g" "$v"
        for view in plan asm; do
            f=${g%.kiln}.$v.$view
            ndumps=$((ndumps + 1))
            if ! cmp -s "$out/a/$f" "$out/b/$f"; then
                ndiff=$((ndiff + 1))
                differ+=("$f")
            fi
        done
    done
done

echo
echo "same_code.sh: ${rev_a:0:12} ($1) against ${rev_b:0:12} (${2:-HEAD})"
echo "  ${#graphs[@]} graphs (bench/, tests/golden/) x ${#variants[@]} variants (fused, eager, compact, 256-bit) x plan and asm = $ndumps dumps"
[ "$wide" = yes ] || echo "  note: this host has no AVX-512: the 256-bit variant is the host's own width"
echo "  dumps kept in $out/a and $out/b"
if [ "$ndiff" = 0 ]; then
    echo "  same code: every dump is identical"
    exit 0
fi
echo "  DIFFERENT: $ndiff of $ndumps dumps differ:"
for f in "${differ[@]}"; do
    echo "  ---- $f"
    diff -u "$out/a/$f" "$out/b/$f" | sed -n '3,14p' | sed 's/^/    /'
done
exit 1
