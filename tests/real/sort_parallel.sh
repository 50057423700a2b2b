#!/bin/bash
# A multi-threaded sort under nalloc: sort --parallel=2 with a small buffer
# (so it also spills and merges temporary files) on a generated 32 MiB
# text file; same output with and without nalloc.
. "$(dirname "$0")/common.sh" "$1"
PY=$(python_bin)
need "$PY" sort
cd "$WORK"
"$PY" "$HERE/gen_data.py" 32 --lines >lines
mkdir -p tmp1 tmp2
export LC_ALL=C
run_plain sort sort --parallel=2 -S 8M -T tmp1 -k3,3 -k2,2n lines
run_nalloc sort sort --parallel=2 -S 8M -T tmp2 -k3,3 -k2,2n lines
same_output sort
served sort 85
echo "PASS $TEST"
