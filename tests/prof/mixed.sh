#!/bin/sh
# mixed.sh PROG NALLOC_PROF DIR -- sampled profiles of stacks that allocate
# a mix of sizes (prof_mixed.c) must give the right total objects AND
# bytes in every reader: google-pprof, jeprof, Go's pprof and nalloc-prof
# each unbias each line by its average object size (issue 13 item 1: with
# one line per stack they said 388k-420k objects for 2.2M). Rates 2^12,
# 2^14, 2^17 and 2^19; at the two high rates the program runs several
# times and the totals of its runs are compared (a precise estimate needs
# more samples than one run's memory can hold). The tolerance is 6
# standard deviations of the estimate (from the program's truth line)
# plus one object or byte per line for the readers that truncate each
# line. A reader that is not installed is skipped; if none of the three
# outside readers is, the test is (77).
set -u
prog=$1 np=$2 dir=$3
mkdir -p "$dir" && rm -f "$dir"/*.heap
fail=0
have() { command -v "$1" >/dev/null 2>&1; }
readers=""
have google-pprof && readers="$readers google-pprof"
have jeprof && readers="$readers jeprof"
have go && go tool pprof -h >/dev/null 2>&1 && readers="$readers go"
[ -n "$readers" ] || { echo "SKIP: no pprof reader installed"; exit 77; }
[ -x "$np" ] && readers="$readers nalloc-prof"

# total TOOL objects|bytes FILE
total() {
  case $1 in
    go)
      idx=inuse_space; [ "$2" = objects ] && idx=inuse_objects
      go tool pprof -text -sample_index=$idx -unit=B "$3" 2>/dev/null |
        sed -n 's/.* of \([0-9.]*\)B\{0,1\} total.*/\1/p' | head -n 1 ;;
    nalloc-prof)
      opt=--inuse_space; [ "$2" = objects ] && opt=--inuse_objects
      "$np" top $opt -n 1 "$3" | sed -n 's/^Total: \([0-9]*\) .*/\1/p' ;;
    *)
      opt=--show_bytes; [ "$2" = objects ] && opt=--inuse_objects
      $1 --text $opt "$prog" "$3" 2>/dev/null |
        sed -n 's/^Total: \([0-9.]*\) .*/\1/p' | head -n 1 ;;
  esac
}

for spec in 12:1 14:1 17:2 19:4; do
  lg=${spec%:*} reps=${spec#*:}
  objs=0 bytes=0 vo=0 vb=0 lines=0 files=""
  i=0
  while [ $i -lt $reps ]; do
    f=$dir/mixed.$lg.$i.heap
    out=$(NALLOC_CONF=prof:true,prof_prefix: "$prog" $lg "$f") || { echo "FAIL: run at lg $lg"; exit 1; }
    set -- $out
    [ "$1" = truth ] || { echo "FAIL: no truth line: $out"; exit 1; }
    objs=$(awk "BEGIN {print $objs + $2}") bytes=$(awk "BEGIN {print $bytes + $3}")
    vo=$(awk "BEGIN {print $vo + $4 * $4}") vb=$(awk "BEGIN {print $vb + $5 * $5}")
    lines=$((lines + $6)) files="$files $f"
    i=$((i + 1))
  done
  sdo=$(awk "BEGIN {print sqrt($vo)}") sdb=$(awk "BEGIN {print sqrt($vb)}")
  for r in $readers; do
    for what in objects bytes; do
      v=0
      for f in $files; do
        x=$(total $r $what "$f")
        [ -n "$x" ] || { v=""; break; }
        v=$(awk "BEGIN {printf \"%.0f\", $v + $x}")
      done
      if [ $what = objects ]; then t=$objs sd=$sdo; else t=$bytes sd=$sdb; fi
      ok=$(awk -v v="$v" -v t="$t" -v sd="$sd" -v l="$lines" 'BEGIN {
             d = v - t; if (d < 0) d = -d;
             print (v != "" && d <= 6 * sd + l) ? "ok" : "FAIL" }')
      printf "lg %s x%s %-12s %-7s %14s truth %14s (%+.2f%%, 6 sd = %.2f%%) %s\n" \
        $lg $reps $r $what "${v:-?}" $t \
        "$(awk -v v="${v:-0}" -v t=$t 'BEGIN {print 100 * (v / t - 1)}')" \
        "$(awk -v s=$sd -v t=$t 'BEGIN {print 600 * s / t}')" $ok
      [ $ok = ok ] || fail=1
    done
  done
done
[ $fail = 0 ] && echo "mixed sizes: ok" || echo "mixed sizes: FAILED"
exit $fail
