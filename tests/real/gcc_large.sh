#!/bin/bash
# A compiler under nalloc: gcc -O2 on a large generated C file (gen_c.py).
# The object file must be byte-identical with and without nalloc (gcc's
# output does not depend on heap addresses), and nalloc must have served
# the compiler proper (cc1: the largest nmalloc of the processes).
. "$(dirname "$0")/common.sh" "$1"
PY=$(python_bin)
need gcc "$PY" sha256sum size
"$PY" "$HERE/gen_c.py" 600 >"$WORK/big.c"
echo "gcc_large: $(wc -l <"$WORK/big.c") lines"
cd "$WORK"
run_plain cc gcc -O2 -c big.c -o plain.o
run_nalloc cc gcc -O2 -c big.c -o nalloc.o
same_output cc
a=$(sha256sum <plain.o) b=$(sha256sum <nalloc.o)
[ "$a" = "$b" ] || fail "object files differ: $(size plain.o nalloc.o)"
echo "gcc_large: identical objects: $(size nalloc.o | tail -1)"
served cc 40000
echo "PASS $TEST"
