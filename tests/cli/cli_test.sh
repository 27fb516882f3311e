#!/usr/bin/env bash
# cli_test.sh KILN SOURCE_DIR — the kiln command from the outside: help, version, exit codes
# (0 ok, 1 failure, 2 usage), dump round trips on every .kiln file of the tree, and `kiln run`
# on small graphs whose .npy results are checked byte for byte against the .npy format
# specification and hand arithmetic.  Needs nothing beyond bash and coreutils (the NumPy
# comparison is cli_numpy.sh).
set -u
kiln=$1
src=$2
here=$src/tests/cli
tmp=$(mktemp -d /tmp/kiln-cli-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
failures=0
checks=0

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# expect CODE NEEDLE CMD... — run CMD; its exit status must be CODE and its stdout+stderr
# must contain NEEDLE (a fixed string; '' matches anything).  Failures (1) and usage errors
# (2) must print to stderr only.
expect() {
    local code=$1 needle=$2
    shift 2
    checks=$((checks + 1))
    "$@" >out.txt 2>err.txt </dev/null
    local rc=$?
    if [ "$rc" != "$code" ]; then
        fail "$* -> exit $rc, want $code"
        sed 's/^/    /' out.txt err.txt | head -20
        return
    fi
    if [ -n "$needle" ] && ! grep -qF -- "$needle" out.txt err.txt; then
        fail "$* -> output lacks '$needle'"
        sed 's/^/    /' out.txt err.txt | head -20
    fi
    if [ "$code" != 0 ] && [ -s out.txt ]; then
        fail "$* -> exit $code but wrote to stdout"
    fi
    if [ "$code" != 0 ] && ! [ -s err.txt ]; then
        fail "$* -> exit $code without a message"
    fi
}

# same_file WANT GOT WHAT
same_file() {
    checks=$((checks + 1))
    if ! cmp -s "$1" "$2"; then
        fail "$3: $2 differs from $1"
        cmp "$1" "$2" | head -3
    fi
}

# npy FILE DESCR FORTRAN SHAPE DATA — a version 1.0 .npy file laid out as the format
# specification says numpy writes it: the dict, 21 - len(str(shape[0])) spare spaces,
# padding to a multiple of 64 (all these headers fit in 128 bytes), '\n', then DATA
# (printf escapes).
npy() {
    local dict="{'descr': '$2', 'fortran_order': $3, 'shape': $4, }"
    local pad=$((127 - 10 - ${#dict}))
    { printf '\x93NUMPY\x01\x00\x76\x00%s%*s\n' "$dict" "$pad" ''; printf "$5"; } >"$1"
}

# ---- help, version, the default job ----------------------------------------------------
expect 0 "usage: kiln" "$kiln" --help
expect 0 "usage: kiln" "$kiln" -h
expect 0 "usage: kiln dump" "$kiln" dump --help
expect 0 "usage: kiln run" "$kiln" run --help
expect 0 "usage: kiln run" "$kiln" help run
expect 0 "usage: kiln run" "$kiln" run x.kiln --in a=b.npy --help
expect 0 "LLVM 19." "$kiln" --version
checks=$((checks + 1))
grep -qE '^kiln [0-9]+\.[0-9]+\.[0-9]+$' out.txt || fail "--version: no 'kiln X.Y.Z' line"
grep -qE '^host: .+ \(.+, (128|256|512)-bit vectors\)$' out.txt || fail "--version: no host line"
expect 0 "== chain ==" "$kiln" examples
checks=$((checks + 1))
grep -q '^== softmax ==' out.txt || fail "default job: no softmax example"
# Each softmax row sums to 1 over 16 columns, so the mean is 1/16 whatever the inputs.
grep -qE '^  y: f32\[4,16\]  min [0-9.e-]+  max [0-9.e-]+  mean 0\.0625$' out.txt ||
    fail "default job: softmax result mean is not 0.0625"

# ---- usage errors: exit 2 ---------------------------------------------------------------
expect 2 "unknown command 'frob'" "$kiln" frob
expect 2 "unknown option '--frob'" "$kiln" --frob
expect 2 "unknown command 'frob'" "$kiln" help frob
expect 2 "missing the graph file" "$kiln" dump
expect 2 "one graph file at a time" "$kiln" dump a.kiln b.kiln
expect 2 "unknown option '--svg'" "$kiln" dump --svg a.kiln
expect 2 "missing the graph file" "$kiln" run
expect 2 "option --in needs an argument" "$kiln" run a.kiln --in
expect 2 "--in wants NAME=FILE.npy, got 'x'" "$kiln" run a.kiln --in x
expect 2 "--out wants NAME=FILE.npy, got '=o.npy'" "$kiln" run a.kiln --out =o.npy
expect 2 "--in x is given twice" "$kiln" run a.kiln --in x=a.npy --in x=b.npy
expect 2 "unknown mode 'fast'" "$kiln" run a.kiln --mode fast
expect 2 "unknown option '--threads'" "$kiln" run a.kiln --threads 4
expect 2 "option --mode needs an argument" "$kiln" run a.kiln --mode

# ---- dump: every graph of the tree prints, and what it prints prints the same again ----
ngraphs=0
for f in "$here"/*.kiln "$src"/tests/golden/*.kiln "$src"/bench/*.kiln; do
    [ -e "$f" ] || continue
    case $(basename "$f") in bad_* | invalid_* | err_*) continue ;; esac
    ngraphs=$((ngraphs + 1))
    expect 0 "graph " "$kiln" dump "$f"
    cp out.txt first.kiln
    expect 0 "graph " "$kiln" dump first.kiln
    same_file first.kiln out.txt "dump of dump of $f"
    checks=$((checks + 1))
    "$kiln" dump - <"$f" >stdin.kiln 2>err.txt || fail "dump - < $f: $(cat err.txt)"
    same_file first.kiln stdin.kiln "dump - < $f"
    expect 0 "digraph" "$kiln" dump --dot "$f"
done
echo "dumped $ngraphs graphs"

# ---- kiln check: the bound covers the interpreter's own error -----------------------------
# gelu_erf(x) of f64 far in the negative tail: the interpreter's erfc(-x/sqrt(2)) is off by
# up to 2x^2 ULPs, 826 at x = -25, which a bound of x^2 called a kernel error (fuzz_graphs)
expect 0 "of the bound" "$kiln" check "$src/tests/fuzz/corpus/graphs/gelu_erf_tail.kiln"
# an f32 mean of terms near 3e38: a block's f32 sum overflows to -inf where the interpreter's
# f64 sum does not; the bound is infinite there (docs/semantics.md), not 3e32 (fuzz_graphs)
expect 0 "of the bound" "$kiln" check "$src/tests/fuzz/corpus/graphs/f32_block_overflow.kiln"

# ---- failures: exit 1 with the file's name and place -------------------------------------
expect 1 "absent.kiln: cannot open" "$kiln" dump absent.kiln
expect 1 "bad_parse.kiln:3:7:" "$kiln" dump "$here/bad_parse.kiln"
expect 1 "unknown op 'frobnicate'" "$kiln" dump "$here/bad_parse.kiln"
expect 1 "bad_verify.kiln:3:" "$kiln" dump "$here/bad_verify.kiln"
expect 1 "[3] vs [4]" "$kiln" dump "$here/bad_verify.kiln"
expect 1 "bad_parse.kiln:3:7:" "$kiln" run "$here/bad_parse.kiln" --in x=x.npy
expect 1 "absent.kiln: cannot open" "$kiln" check absent.kiln
# kiln bench reports a workload that fails in its table (on stdout), with the reason
checks=$((checks + 1))
"$kiln" bench absent.kiln --time 0.01 >out.txt 2>err.txt </dev/null
rc=$?
if [ $rc -ne 1 ] || ! grep -qF "absent.kiln  FAILED: absent.kiln: cannot open" out.txt; then
    fail "kiln bench absent.kiln: exit $rc, stdout: $(head -c 300 out.txt)"
fi
expect 2 "--mode is fused or eager" "$kiln" dump "$here/vec4.kiln" --plan --mode interp
expect 0 "kernel over" "$kiln" dump "$here/vec4.kiln" --plan
expect 0 "kernel over" "$kiln" dump "$here/vec4.kiln" --plan --mode eager
expect 0 "      schedule: " "$kiln" dump "$here/vec4.kiln" --plan

# ---- run: outputs against the .npy specification and hand arithmetic ---------------------
# gen.kiln has no inputs: v4 = [0,1,2,3] f32, v5 = [0..4] f32, i4 = [0,1,2,3] i32,
# b3 = [true]*3.
expect 0 "" "$kiln" run "$here/gen.kiln" --out v4=v4.npy --out v5=v5.npy --out i4=i4.npy \
    --out b3=b3.npy
npy want_v4.npy '<f4' False '(4,)' '\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40'
npy want_i4.npy '<i4' False '(4,)' '\x00\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00'
npy want_b3.npy '|b1' False '(3,)' '\x01\x01\x01'
same_file want_v4.npy v4.npy "run gen.kiln: v4"
expect 0 "LLVM compiles" env KILN_CACHE_DIR=off "$kiln" run "$here/gen.kiln" --out v4=v4.npy --stats
same_file want_i4.npy i4.npy "run gen.kiln: i4"
same_file want_b3.npy b3.npy "run gen.kiln: b3"
# Outputs without --out are summarised on stdout.
expect 0 "i4: i32[4]  min 0  max 3  mean 1.5" "$kiln" run "$here/gen.kiln" --out v4=v4.npy
checks=$((checks + 1))
grep -q "v4:" out.txt && fail "run: an output written to a file was also printed"

# vec4: out = 2x + 1 on [0,1,2,3] = [1,3,5,7].
npy want_out.npy '<f4' False '(4,)' '\x00\x00\x80\x3f\x00\x00\x40\x40\x00\x00\xa0\x40\x00\x00\xe0\x40'
expect 0 "" "$kiln" run "$here/vec4.kiln" --in x=v4.npy --out out=out.npy
same_file want_out.npy out.npy "run vec4.kiln"
expect 0 "" "$kiln" run "$here/vec4.kiln" --in=x=v4.npy --out=out=out2.npy --mode interp
same_file want_out.npy out2.npy "run vec4.kiln (--opt=value)"
expect 0 "" "$kiln" run "$here/vec4.kiln" --in x=v4.npy --out out=out4.npy --mode eager
same_file want_out.npy out4.npy "run vec4.kiln --mode eager"
checks=$((checks + 1))
"$kiln" run - --in x=v4.npy --out out=out3.npy <"$here/vec4.kiln" || fail "run - < vec4.kiln"
same_file want_out.npy out3.npy "run - < vec4.kiln"
expect 0 "out: f32[4]  min 1  max 7  mean 4" "$kiln" run "$here/vec4.kiln" --in x=v4.npy
expect 0 "[1, 3, 5, 7]" "$kiln" run "$here/vec4.kiln" --in x=v4.npy

# ---- run: bad inputs ---------------------------------------------------------------------
expect 1 "missing input: every input needs a file: --in x=FILE.npy (f32[4])" \
    "$kiln" run "$here/vec4.kiln"
expect 1 "--in k=FILE.npy (i32[3]), --in m=FILE.npy (bool[2,3])" \
    "$kiln" run "$here/mixed.kiln" --in a=v4.npy
expect 1 "graph 'vec4' has no input 'y' (its inputs: x)" \
    "$kiln" run "$here/vec4.kiln" --in x=v4.npy --in y=v4.npy
expect 1 "graph 'vec4' has no output 'o' (its outputs: out)" \
    "$kiln" run "$here/vec4.kiln" --in x=v4.npy --out o=o.npy
expect 1 "input 'x' does not match the graph: expected f32[4], got f32[5] from v5.npy" \
    "$kiln" run "$here/vec4.kiln" --in x=v5.npy
expect 1 "input 'x' does not match the graph: expected f32[4], got i32[4] from i4.npy" \
    "$kiln" run "$here/vec4.kiln" --in x=i4.npy
expect 1 "absent.npy: cannot open" "$kiln" run "$here/vec4.kiln" --in x=absent.npy
head -c 140 v4.npy >cut.npy
expect 1 "cut.npy: truncated data: expected 16 bytes, got 12" \
    "$kiln" run "$here/vec4.kiln" --in x=cut.npy
{ cat v4.npy; printf 'junk'; } >long.npy
expect 1 "long.npy: trailing data: 4 bytes" "$kiln" run "$here/vec4.kiln" --in x=long.npy
npy be.npy '>f4' False '(4,)' '\x00\x00\x00\x00\x3f\x80\x00\x00\x40\x00\x00\x00\x40\x40\x00\x00'
expect 1 "be.npy: unsupported dtype: '>f4': big-endian" "$kiln" run "$here/vec4.kiln" --in x=be.npy
npy fo.npy '<f4' True '(2, 2)' '\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00'
expect 1 "fo.npy: unsupported layout: fortran_order is True" \
    "$kiln" run "$here/vec4.kiln" --in x=fo.npy
npy obj.npy '|O' False '(1,)' '\x00\x00\x00\x00\x00\x00\x00\x00'
expect 1 "obj.npy: unsupported dtype: '|O': object arrays" \
    "$kiln" run "$here/vec4.kiln" --in x=obj.npy
printf 'not a numpy file' >text.npy
expect 1 "text.npy: not a .npy file: bad magic" "$kiln" run "$here/vec4.kiln" --in x=text.npy
expect 1 "no/such/dir/out.npy: cannot create" \
    "$kiln" run "$here/vec4.kiln" --in x=v4.npy --out out=no/such/dir/out.npy

# kiln cache, on a private directory (ctest sets KILN_CACHE_DIR=off for everything else)
cdir=$tmp/cache
expect 0 "not created yet" env KILN_CACHE_DIR="$cdir" "$kiln" cache
expect 0 "== chain ==" env KILN_CACHE_DIR="$cdir" "$kiln" examples
expect 0 "entries:  2" env KILN_CACHE_DIR="$cdir" "$kiln" cache
expect 0 "writes:   2" env KILN_CACHE_DIR="$cdir" "$kiln" cache
expect 0 "== chain ==" env KILN_CACHE_DIR="$cdir" "$kiln" examples
expect 0 "hits:     2" env KILN_CACHE_DIR="$cdir" "$kiln" cache
expect 0 "removed 0 entries" env KILN_CACHE_DIR="$cdir" "$kiln" cache trim
expect 0 "removed 2 entries" env KILN_CACHE_DIR="$cdir" "$kiln" cache clear
expect 0 "entries:  0" env KILN_CACHE_DIR="$cdir" "$kiln" cache
expect 0 "state:    off: turned off (KILN_CACHE_DIR=off)" env KILN_CACHE_DIR=off "$kiln" cache
expect 1 "disk cache off" env KILN_CACHE_DIR=off "$kiln" cache clear
chmod 0770 "$cdir"
expect 0 "writable by group or others" env KILN_CACHE_DIR="$cdir" "$kiln" cache
expect 1 "writable by group or others" env KILN_CACHE_DIR="$cdir" "$kiln" cache trim
# a project folder is not kiln's: nothing written into it, nothing removed from it
proj=$tmp/proj
mkdir -m 0700 "$proj" && echo "the user's" >"$proj/stats" && echo notes >"$proj/notes.txt"
expect 0 "not kiln's cache" env KILN_CACHE_DIR="$proj" "$kiln" cache
expect 0 "== chain ==" env KILN_CACHE_DIR="$proj" "$kiln" examples
expect 1 "not kiln's cache" env KILN_CACHE_DIR="$proj" "$kiln" cache clear
checks=$((checks + 1))
[ "$(cat "$proj/stats")" = "the user's" ] && [ "$(ls "$proj" | wc -l)" = 2 ] ||
    fail "kiln wrote into or removed from a folder that is not its cache: $(ls "$proj")"
# a bad cap, a dangling directory: off, and why; a file clear cannot remove: exit 1
expect 0 "off: KILN_CACHE_SIZE_MB=abc is not a whole number" \
    env KILN_CACHE_DIR="$tmp/c2" KILN_CACHE_SIZE_MB=abc "$kiln" cache
ln -s "$tmp/nothing" "$tmp/dangling"
expect 0 "off: $tmp/dangling is a symbolic link to nothing" \
    env KILN_CACHE_DIR="$tmp/dangling" "$kiln" cache
mkdir -m 0700 "$tmp/c3" && mkdir "$tmp/c3/0123456789abcdef0123456789abcdef.kobj" &&
    touch "$tmp/c3/0123456789abcdef0123456789abcdef.kobj/x"
expect 1 "cannot remove 1 file (removed 0 entries)" env KILN_CACHE_DIR="$tmp/c3" "$kiln" cache clear
expect 2 "unknown subcommand 'frob'" "$kiln" cache frob
expect 2 "--max-mb needs" "$kiln" cache trim --max-mb 0
expect 0 "usage: kiln cache" "$kiln" cache --help

echo "$checks checks, $failures failures"
[ "$failures" = 0 ]
