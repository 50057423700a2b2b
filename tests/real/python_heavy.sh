#!/bin/bash
# A Python interpreter running an allocation-heavy script under nalloc:
# same digest with and without nalloc; every object from malloc
# (PYTHONMALLOC=malloc), so nalloc serves millions of allocations.
. "$(dirname "$0")/common.sh" "$1"
PY=$(python_bin)
need "$PY"
export PYTHONHASHSEED=0 PYTHONMALLOC=malloc PYTHONDONTWRITEBYTECODE=1
run_plain py "$PY" -s "$HERE/heavy.py"
run_nalloc py "$PY" -s "$HERE/heavy.py"
same_output py
served py 1000000
echo "PASS $TEST"
