#!/bin/bash
# Multi-threaded programs under nalloc: xz -T2 and zstd -T2 compress a
# generated 32 MiB file and decompress it again. The compressed streams
# are the same as without nalloc (multi-threaded xz and zstd output is
# deterministic: xz -0 cuts 1 MiB blocks, compressed by 2 threads), and the
# round trip gives the input back.
. "$(dirname "$0")/common.sh" "$1"
PY=$(python_bin)
need "$PY" xz zstd sha256sum
cd "$WORK"
"$PY" "$HERE/gen_data.py" 32 >data
want=$(sha256sum <data)

run_plain xz xz -T2 -0 -c data
run_nalloc xz xz -T2 -0 -c data
same_output xz
run_nalloc unxz xz -T2 -d -c xz.nalloc.out
[ "$(sha256sum <unxz.nalloc.out)" = "$want" ] || fail "xz -d under nalloc did not give the input back"
echo "xz: round trip ok"

run_plain zst zstd -T2 -3 -q -c data
run_nalloc zst zstd -T2 -3 -q -c data
same_output zst
run_nalloc unzst zstd -d -q -c zst.nalloc.out
[ "$(sha256sum <unzst.nalloc.out)" = "$want" ] || fail "zstd -d under nalloc did not give the input back"
echo "zstd: round trip ok"

served xz 220
served unxz 220
served zst 90
served unzst 55
echo "PASS $TEST"
