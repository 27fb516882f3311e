#!/usr/bin/env bash
# public_api.sh NM OBJECTS — the kiln command's run, dump and cache are clients of kiln.h
# only: their objects, and those of the files every subcommand links (cli.c, main.c),
# may not use a symbol of the library's internal modules (ir_, cap_, jit_).  bench and
# check read the internals through bench.h; npy.c reports through lib/ir (npy.h says why).
# OBJECTS: every object of the kiln target, ';'-separated (CMake's list); it picks those
# files by name.
set -u
nm=$1
IFS=';' read -r -a objects <<<"$2"
checked=0
bad=0
for o in "${objects[@]}"; do
    case $(basename "$o") in
    cmd_run.c.o | cmd_dump.c.o | cmd_cache.c.o | cli.c.o | main.c.o) ;;
    *) continue ;;
    esac
    checked=$((checked + 1))
    syms=$("$nm" -u "$o" | awk '{print $NF}' | grep -E '^(ir|cap|jit)_') && {
        echo "FAIL: $(basename "$o") uses internal symbols:" $syms
        bad=1
    }
done
if [ "$checked" -ne 5 ]; then
    echo "FAIL: expected the 5 objects of run, dump, cache, cli and main, found $checked"
    exit 1
fi
[ "$bad" -eq 0 ] && echo "ok: run, dump, cache, cli.c and main.c use kiln.h only"
exit $bad
