#!/bin/sh
# readers.sh TOOL PROG DIR -- can TOOL (google-pprof, jeprof or go) read
# nalloc's dumps and name the right functions with the right numbers?
# PROG is prof_reader_prog (see its header for the three workloads).
# Exits 77 (ctest SKIP_RETURN_CODE) when the reader is not installed.
set -u
tool=$1 prog=$2 dir=$3
case $tool in
  go) command -v go >/dev/null 2>&1 && go tool pprof -h >/dev/null 2>&1 ||
        { echo "SKIP: go tool pprof not installed"; exit 77; } ;;
  *) command -v "$tool" >/dev/null 2>&1 ||
        { echo "SKIP: $tool not installed"; exit 77; } ;;
esac
mkdir -p "$dir" && rm -f "$dir"/*.heap
fail() { echo "FAIL ($tool): $*"; exit 1; }

NALLOC_CONF=prof:true,lg_prof_sample:0,prof_active:false \
  "$prog" exact "$dir/exact.heap" || fail "exact run"
NALLOC_CONF=prof:true,lg_prof_sample:12 \
  "$prog" sampled "$dir/sampled.heap" || fail "sampled run"

# report KIND FILE: "<value> <function>" per line (flat column, bytes or
# objects), from the tool's text report.
report() {
  if [ "$tool" = go ]; then
    idx=inuse_space; [ "$1" = objects ] && idx=inuse_objects
    go tool pprof -text -sample_index=$idx -unit=B "$2" 2>&1 |
      awk '$1 ~ /^[0-9.]+B?$/ {v=$1; sub(/B$/, "", v); print v, $NF}'
  else
    opt=--show_bytes; [ "$1" = objects ] && opt=--inuse_objects
    $tool --text $opt "$prog" "$2" 2>&1 | awk '$1 ~ /^[0-9]+$/ {print $1, $NF}'
  fi
}
flat() { echo "$1" | awk -v f="$2" '$2 == f {print $1; exit}'; }
# within VALUE TRUTH PERCENT
within() { awk -v v="$1" -v t="$2" -v p="$3" 'BEGIN {d = v / t - 1; exit !(v != "" && d < p / 100 && d > -p / 100)}'; }

out=$(report bytes "$dir/exact.heap")
echo "$out"
[ "$(flat "$out" b)" = 7 ] || fail "exact: b should hold 7 bytes"
[ "$(flat "$out" a)" = 4 ] || fail "exact: a should hold 4 bytes"
out=$(report objects "$dir/exact.heap")
[ "$(flat "$out" b)" = 3 ] || fail "exact: b should hold 3 objects"
[ "$(flat "$out" a)" = 2 ] || fail "exact: a should hold 2 objects"

# Sampled (R = 4096): b 40960000 B, a 20480000 B. One sigma is about
# sqrt(S*R): 1.0% for b, 1.4% for a; 8% is more than 5 sigma for both.
out=$(report bytes "$dir/sampled.heap")
echo "$out" | head -3
within "$(flat "$out" b)" 40960000 8 || fail "sampled: b estimate"
within "$(flat "$out" a)" 20480000 8 || fail "sampled: a estimate"

if [ "$tool" = jeprof ]; then
  # jemalloc's threaded format, exact mode (R = 1, pre-biased).
  NALLOC_CONF=prof:true,lg_prof_sample:0,prof_format:jemalloc \
    "$prog" threads "$dir/threads.heap" || fail "threads run"
  # Thread uids follow the order in which threads first sample: main is
  # usually t0 and the worker t1, but not always (the ASan build differs).
  w=$(sed -n 's/^  t\([0-9]*\): .* worker$/\1/p' "$dir/threads.heap" | head -n 1)
  [ -n "$w" ] || fail "no named worker thread line"
  m=$(sed -n 's/^  t\([0-9]*\): .*/\1/p' "$dir/threads.heap" | grep -vx "$w" | head -n 1)
  [ -n "$m" ] || fail "no main thread line"
  out=$(report bytes "$dir/threads.heap")
  [ "$(flat "$out" worker_alloc)" = 100000 ] || fail "threads: worker_alloc"
  [ "$(flat "$out" b)" = 50000 ] || fail "threads: b"
  out=$(jeprof --text --show_bytes --thread=$w "$prog" "$dir/threads.heap" 2>&1)
  echo "$out" | grep -q "^Total (t$w): 100000 B" || fail "--thread=$w total"
  out=$(jeprof --text --show_bytes --thread=$m "$prog" "$dir/threads.heap" 2>&1 |
        awk '$1 ~ /^[0-9]+$/ {print $1, $NF}')
  [ "$(flat "$out" b)" = 50000 ] || fail "--thread=$m: b"
  [ -z "$(flat "$out" worker_alloc)" ] || fail "--thread=$m shows worker"
fi
# The views of issue 14 ('#nalloc' lines before MAPPED_LIBRARIES) change
# nothing a reader sees: every report of a dump that has them is the same,
# byte for byte, as the report of that dump with them taken out.
for mode in exact sampled; do
  conf=prof:true,numa_nodes:4,narenas_per_node:1,lg_prof_sample:0
  extra=temporary
  [ $mode = sampled ] && conf=prof:true,numa_nodes:4,narenas_per_node:1,lg_prof_sample:16 extra=lifetime
  NALLOC_CONF=$conf "$prog" views "$dir/views-$mode.heap" || fail "views run ($mode)"
  grep -q '^#nalloc node 3 ' "$dir/views-$mode.heap" || fail "$mode: no node lines"
  grep -q "^#nalloc $extra " "$dir/views-$mode.heap" || fail "$mode: no $extra lines"
  grep -v '^#' "$dir/views-$mode.heap" > "$dir/plain-$mode.heap"
  for kind in inuse_space inuse_objects alloc_space alloc_objects; do
    if [ "$tool" = go ]; then
      go tool pprof -raw -sample_index=$kind "$dir/views-$mode.heap" > "$dir/v.out" 2>/dev/null
      go tool pprof -raw -sample_index=$kind "$dir/plain-$mode.heap" > "$dir/p.out" 2>/dev/null
    else
      $tool --text --$kind "$prog" "$dir/views-$mode.heap" > "$dir/v.out" 2>/dev/null
      $tool --text --$kind "$prog" "$dir/plain-$mode.heap" > "$dir/p.out" 2>/dev/null
    fi
    grep -q . "$dir/v.out" || fail "$mode $kind: no report"
    cmp -s "$dir/v.out" "$dir/p.out" || fail "$mode $kind: the view lines changed the report"
  done
done
echo "readers ($tool): ok"
