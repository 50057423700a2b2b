# common.sh -- sourced by the real-program tests.
#
#   . common.sh /path/to/libnalloc.so
#
# run_plain NAME CMD...            runs CMD without nalloc
# run_nalloc NAME CMD...           runs CMD with LD_PRELOAD=libnalloc.so and
#                                  NALLOC_CONF=stats_print:true
# same_output NAME                 stdout (and stderr without nalloc's lines)
#                                  of both runs are identical
# served NAME MIN                  some process of the nalloc run printed
#                                  "<nalloc>: stats: ... nmalloc=N" at exit
#                                  with N >= MIN: nalloc really served the
#                                  allocations (N counts every block handed
#                                  out, as a counting LD_PRELOAD shim does:
#                                  xz -T2 -0 on the 32 MiB input makes 275
#                                  malloc/calloc calls, sort --parallel=2 106;
#                                  MIN is about 80% of such a count)
# Both runs' outputs are in $WORK/NAME.{plain,nalloc}.{out,err}.
set -euo pipefail

NALLOC_SO=${1:?usage: $0 /path/to/libnalloc.so}
case "$NALLOC_SO" in /*) ;; *) NALLOC_SO=$PWD/$NALLOC_SO ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/nalloc_real.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
TEST=$(basename "$0" .sh)

fail() {
  echo "FAIL $TEST: $*" >&2
  exit 1
}
[ -r "$NALLOC_SO" ] || fail "libnalloc.so not found at $NALLOC_SO"

# A missing program is "skipped" (exit 77), visibly, in ctest's summary.
need() {
  local t
  for t; do
    command -v "$t" >/dev/null 2>&1 || {
      echo "SKIP $TEST: $t is not installed" >&2
      exit 77
    }
  done
}

run_plain() {
  local n=$1 rc=0
  shift
  env -u LD_PRELOAD -u NALLOC_CONF "$@" >"$WORK/$n.plain.out" \
    2>"$WORK/$n.plain.err" || rc=$?
  [ "$rc" -eq 0 ] || fail "$n without nalloc exited $rc: $(head -c 3000 "$WORK/$n.plain.err")"
}

run_nalloc() {
  local n=$1 rc=0
  shift
  env LD_PRELOAD="$NALLOC_SO" NALLOC_CONF=stats_print:true "$@" \
    >"$WORK/$n.nalloc.out" 2>"$WORK/$n.nalloc.raw" || rc=$?
  grep -v '^<nalloc>: ' "$WORK/$n.nalloc.raw" >"$WORK/$n.nalloc.err" || true
  if [ "$rc" -ne 0 ]; then
    fail "$n under nalloc exited $rc (without nalloc: 0); stderr: $(head -c 3000 "$WORK/$n.nalloc.raw")"
  fi
}

# Checked after the outputs, so that a wrong result is reported first.
served() {
  local n=$1 min=$2 lines max
  lines=$(grep -c '^<nalloc>: stats: ' "$WORK/$n.nalloc.raw" || true)
  [ "$lines" -gt 0 ] || fail "$n: no '<nalloc>: stats: ...' line on stderr at exit: libnalloc not loaded, or NALLOC_CONF=stats_print:true not honoured (the program may have closed fd 2 before nalloc's exit hook ran)"
  max=$(sed -nE 's/^<nalloc>: stats: .*[ ]nmalloc=([0-9]+).*/\1/p' "$WORK/$n.nalloc.raw" | sort -n | tail -1)
  [ -n "$max" ] || fail "$n: stats line without nmalloc=: $(grep '^<nalloc>: stats: ' "$WORK/$n.nalloc.raw" | head -3)"
  [ "$max" -ge "$min" ] || fail "$n: nalloc served only nmalloc=$max allocations (want >= $min): the program's allocations did not go to nalloc"
  echo "$n: nalloc served nmalloc=$max (largest of $lines process(es))"
}

same_output() {
  local n=$1
  cmp -s "$WORK/$n.plain.out" "$WORK/$n.nalloc.out" ||
    fail "$n: stdout differs with nalloc:
$(diff "$WORK/$n.plain.out" "$WORK/$n.nalloc.out" | head -20)"
  cmp -s "$WORK/$n.plain.err" "$WORK/$n.nalloc.err" ||
    fail "$n: stderr differs with nalloc:
$(diff "$WORK/$n.plain.err" "$WORK/$n.nalloc.err" | head -20)"
  echo "$n: same output with and without nalloc ($(wc -c <"$WORK/$n.plain.out") bytes)"
}

# The Debian interpreter (not a pyenv shim: a shell script in front of it
# would be preloaded too and add nothing).
python_bin() {
  if [ -x /usr/bin/python3 ]; then echo /usr/bin/python3; else command -v python3; fi
}
