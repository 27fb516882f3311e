#!/usr/bin/env bash
# run.sh [ARGS...] — the main job: install what is missing, build kiln in Release mode in
# build/ (KILN_BUILD_DIR overrides), and run build/kiln with ARGS (none: the default job).
# Set-up and build messages go to stderr, so stdout is kiln's alone.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KILN_BUILD_DIR:-build}
{
    bash scripts/setup.sh
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
    cmake --build "$build" -j"$(nproc)" --target kiln_tool
} >&2
exec "$build/kiln" "$@"
