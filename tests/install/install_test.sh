#!/usr/bin/env bash
# install_test.sh BUILD_DIR CONSUMER_DIR [SANITIZE] [CC] — install the current build into a
# temporary prefix, then build consumer.c against it four ways and run each:
#   1. CMake find_package(kiln) with kiln::kiln          (shared)
#   2. CMake find_package(kiln) with kiln::kiln_static   (static)
#   3. pkg-config --cflags --libs kiln                   (shared)
#   4. pkg-config --static --cflags --libs kiln          (static: libkiln.a named explicitly,
#      since -lkiln picks the shared library when both are installed)
# Each build must link the way it claims (checked with readelf).  SANITIZE is the build's
# KILN_SANITIZE: a sanitized libkiln needs the same flags in the program that links it.
set -eu
build=$1
here=$2
san=${3:-}
cc=${4:-cc}
tmp=$(mktemp -d /tmp/kiln-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
failures=0

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

flags=()
if [ -n "$san" ]; then
    flags=(-fsanitize="$san" -fno-omit-frame-pointer)
fi

echo "== cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || {
    cat "$tmp/install.log"
    exit 1
}
# The layout: one public header, both libraries, the tool, the package files.
pcfile=$(find "$prefix" -name kiln.pc | head -1)
cfgfile=$(find "$prefix" -name kilnConfig.cmake | head -1)
libdir=$(dirname "$(dirname "$pcfile")")
for f in "$prefix/include/kiln.h" "$prefix/bin/kiln" "$libdir/libkiln.a" "$libdir/libkiln.so" \
    "$libdir/libkiln.so.0" "$pcfile" "$cfgfile"; do
    [ -e "$f" ] || fail "not installed: $f"
done
extra=$(cd "$prefix/include" && ls | grep -vx kiln.h || true)
[ -z "$extra" ] || fail "internal headers installed: $extra"
if grep -q "$(dirname "$build")" "$pcfile" "$(dirname "$cfgfile")"/*.cmake 2>/dev/null; then
    fail "installed package files point into the build or source tree"
fi
[ "$failures" = 0 ] || exit 1

# run_consumer NAME EXE LINKAGE — run it; LINKAGE shared or static is checked on the binary.
run_consumer() {
    local name=$1 exe=$2 linkage=$3
    if ! LD_LIBRARY_PATH="$libdir" "$exe"; then
        fail "$name: the consumer failed"
        return
    fi
    local needed
    needed=$(readelf -d "$exe" | grep NEEDED || true)
    case $linkage in
    shared) grep -q 'libkiln\.so' <<<"$needed" || fail "$name: not linked to libkiln.so" ;;
    static) ! grep -q 'libkiln\.so' <<<"$needed" || fail "$name: linked to libkiln.so" ;;
    esac
    echo "$name: ok ($linkage)"
}

# 1, 2: CMake.
for target in kiln::kiln kiln::kiln_static; do
    name="find_package $target"
    bdir=$tmp/cmake-${target#kiln::}
    echo "== $name"
    if ! cmake -S "$here" -B "$bdir" -DCMAKE_PREFIX_PATH="$prefix" \
        -DKILN_CONSUMER_TARGET="$target" -DCMAKE_C_COMPILER="$cc" \
        -DCMAKE_C_FLAGS="${flags[*]}" -DCMAKE_BUILD_TYPE=Release >"$bdir.log" 2>&1; then
        cat "$bdir.log"
        fail "$name: configure failed"
        continue
    fi
    grep -q "kiln_DIR=$prefix/" "$bdir.log" || fail "$name: found a kiln outside $prefix"
    if ! cmake --build "$bdir" >>"$bdir.log" 2>&1; then
        cat "$bdir.log"
        fail "$name: build failed"
        continue
    fi
    [ "$target" = kiln::kiln ] && linkage=shared || linkage=static
    run_consumer "$name" "$bdir/consumer" "$linkage"
done

# 3, 4: pkg-config.
export PKG_CONFIG_PATH="$(dirname "$pcfile")"
export PKG_CONFIG_LIBDIR="$(dirname "$pcfile")"
echo "== pkg-config: $(pkg-config --cflags --libs kiln) | --static: $(pkg-config --static --libs kiln)"
# kiln.pc finds its prefix from its own place (${pcfiledir}): -I must lead to this install.
incdir=$(pkg-config --variable=includedir kiln)
if [ "$(cd "$incdir" 2>/dev/null && pwd -P)" != "$(cd "$prefix/include" && pwd -P)" ]; then
    fail "pkg-config's includedir $incdir is not $prefix/include"
fi
# shellcheck disable=SC2046
if "$cc" "${flags[@]}" -o "$tmp/pc-shared" "$here/consumer.c" $(pkg-config --cflags --libs kiln); then
    run_consumer "pkg-config shared" "$tmp/pc-shared" shared
else
    fail "pkg-config shared: build failed"
fi
static_libs=$(pkg-config --static --libs kiln | sed 's/\(^\| \)-lkiln\( \|$\)/\1-l:libkiln.a\2/')
# shellcheck disable=SC2046,SC2086
if "$cc" "${flags[@]}" -o "$tmp/pc-static" "$here/consumer.c" $(pkg-config --static --cflags kiln) \
    $static_libs; then
    run_consumer "pkg-config static" "$tmp/pc-static" static
else
    fail "pkg-config static: build failed"
fi

[ "$failures" = 0 ] && echo "install test: 4 consumers ok"
[ "$failures" = 0 ]
