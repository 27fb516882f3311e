#!/usr/bin/env bash
# cli_numpy.sh KILN SOURCE_DIR — `kiln run` against NumPy computing the same expressions
# (run_numpy.py).  Exits 77, which CTest reports as skipped, when Debian's python3-numpy is
# not installed.
set -u
py=/usr/bin/python3
if ! [ -x "$py" ] || ! "$py" -c 'import numpy' >/dev/null 2>&1; then
    echo "cli_numpy: $py cannot import numpy (apt-get install python3-numpy): skipped"
    exit 77
fi
exec "$py" "$2/tests/cli/run_numpy.py" "$1" "$2"
