#!/usr/bin/env bash
# bench/realprof.sh -- what heap profiling costs on real programs (issue 13):
# nalloc unprofiled, sampled (prof:true) and exact (prof:true,
# lg_prof_sample:0) beside glibc, heaptrack (on glibc) and jemalloc with and
# without its profiler, each writing its profile at exit.
#
#   bench/realprof.sh [LIBNALLOC]
#   R=5 bench/realprof.sh ...               rounds (default 3)
#   PROGS="python-dict sqlite3" bench/realprof.sh ...   a subset
#   R=0 bench/realprof.sh ...               only the check of the exact profiles
#
# Programs (inputs in bench/real/): python3 building a 10^6-entry dict
# (PYTHONMALLOC=malloc), CPython's regression tests test_dict, test_json
# and test_re (PYTHONMALLOC=malloc; Debian's libpython3.11-testsuite),
# sqlite3 inserting 200k indexed rows in memory, and g++'s compiler proper
# (cc1plus -O2) on a template-heavy file. For each: wall time and peak RSS
# of the largest process (GNU time: wait4's ru_maxrss, so heaptrack's
# helper process counts too), medians of R rounds, every configuration
# once per round in a rotated order; ratios to unprofiled nalloc and to the
# same allocator unprofiled. Then one check per program of nalloc's exact
# profile: its live bytes and objects at exit beside nalloc's own
# statistics at exit (stats_print), and that google-pprof and nalloc-prof
# read it. Prints markdown. Peers or tools that are not installed are
# skipped with a note; a run that fails stops the script with its stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lib=${1:-$here/../build/libnalloc.so}
rounds=${R:-3}
progs=(${PROGS:-python-dict python-tests sqlite3 cc1plus})
lib=$(readlink -f "$lib")
[ -f "$lib" ] || { echo "realprof.sh: no $lib (build nalloc first)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "realprof.sh: needs GNU time as /usr/bin/time (tests/deps.sh installs it)" >&2; exit 2; }
nprof=$(dirname "$lib")/tools/nalloc-prof
[ -x "$nprof" ] || nprof=$(command -v nalloc-prof || true)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

. "$here/lib.sh" # find_lib, median

# configurations: name, LD_PRELOAD, environment, command prefix, base
# (the same allocator unprofiled, for the second ratio)
names=(); preload=(); envs=(); prefix=(); base=(); notes=()
add() { names+=("$1"); preload+=("$2"); envs+=("$3"); prefix+=("$4"); base+=("$5"); }
add "nalloc" "$lib" "" "" "nalloc"
add "nalloc prof:true (sampled)" "$lib" "NALLOC_CONF=prof:true,prof_final:true,prof_prefix:$tmp/p/ns" "" "nalloc"
add "nalloc exact (lg_prof_sample:0)" "$lib" \
    "NALLOC_CONF=prof:true,lg_prof_sample:0,prof_final:true,prof_prefix:$tmp/p/nx" "" "nalloc"
add "glibc" "" "" "" "glibc"
if command -v heaptrack >/dev/null; then
  add "heaptrack (on glibc)" "" "" "$(command -v heaptrack) -o $tmp/p/ht" "glibc"
else
  notes+=("heaptrack: not installed, skipped")
fi
je=$(find_lib libjemalloc.so.2)
if [ -n "$je" ]; then
  if MALLOC_CONF=prof:true LD_PRELOAD=$je /bin/true 2>&1 | grep -q 'Invalid conf'; then
    add "jemalloc" "$je" "" "" "jemalloc"
    notes+=("jemalloc: $je is built without profiling: its profiled rows skipped")
  else
    add "jemalloc" "$je" "" "" "jemalloc"
    add "jemalloc prof:true (sampled, lg 19)" "$je" "MALLOC_CONF=prof:true,prof_final:true,prof_prefix:$tmp/p/js" "" "jemalloc"
    add "jemalloc exact (lg_prof_sample:0)" "$je" \
        "MALLOC_CONF=prof:true,lg_prof_sample:0,prof_final:true,prof_prefix:$tmp/p/jx" "" "jemalloc"
  fi
else
  notes+=("jemalloc: not installed (libjemalloc2), skipped")
fi

py=/usr/bin/python3   # Debian's python (python3 on PATH may be another one)
cc1=$(g++ -print-prog-name=cc1plus 2>/dev/null || true)
declare -A cmd stdin penv desc exe
for p in "${progs[@]}"; do
  case $p in
    python-dict)
      [ -x $py ] || { echo "realprof.sh: no $py (apt-get install python3)" >&2; exit 2; }
      cmd[$p]="$py $here/real/dict.py"; stdin[$p]=/dev/null; exe[$p]=$(readlink -f $py)
      penv[$p]="PYTHONMALLOC=malloc PYTHONHASHSEED=0"
      desc[$p]="python3 bench/real/dict.py: a 10^6-entry dict of lists, strings and tuples (\`PYTHONMALLOC=malloc\`)";;
    python-tests)
      [ -x $py ] || { echo "realprof.sh: no $py (apt-get install python3)" >&2; exit 2; }
      $py -c 'import test.test_dict, test.test_json, test.test_re' 2>/dev/null ||
        { echo "realprof.sh: no CPython test suite (apt-get install libpython3.11-testsuite)" >&2; exit 2; }
      cmd[$p]="$py -m test -q -w test_dict test_json test_re"; stdin[$p]=/dev/null; exe[$p]=$(readlink -f $py)
      penv[$p]="PYTHONMALLOC=malloc PYTHONHASHSEED=0"
      desc[$p]="python3 -m test test_dict test_json test_re: CPython's regression tests (\`PYTHONMALLOC=malloc\`)";;
    sqlite3)
      command -v sqlite3 >/dev/null || { echo "realprof.sh: no sqlite3 (apt-get install sqlite3)" >&2; exit 2; }
      cmd[$p]="$(command -v sqlite3)"; stdin[$p]=$here/real/realprof.sql; exe[$p]=$(command -v sqlite3)
      penv[$p]=""
      desc[$p]="sqlite3 in memory: 200k rows, 2 indexes, group by, self-join (bench/real/realprof.sql)";;
    cc1plus)
      [ -n "$cc1" ] && [ -x "$cc1" ] || { echo "realprof.sh: no cc1plus (apt-get install g++)" >&2; exit 2; }
      cmd[$p]="$cc1 -quiet -imultiarch x86_64-linux-gnu -D_GNU_SOURCE -O2 -std=c++17 $here/real/templates.cc -o $tmp/templates.s"
      stdin[$p]=/dev/null; exe[$p]=$cc1; penv[$p]=""
      desc[$p]="g++'s cc1plus -O2 -std=c++17 on bench/real/templates.cc (std::map, unordered_map, variant, function, tuple, sort, shared_ptr over 3 types)";;
    *) echo "realprof.sh: unknown program '$p' (python-dict python-tests sqlite3 cc1plus)" >&2; exit 2;;
  esac
done

# env --default-signal: a script started in the background (`&`) has SIGINT
# ignored, and its children inherit that (CPython's test_threading checks
# interrupt_main and fails then).
# one run: prints "seconds cpu_seconds maxrss_kib", or "stopped REASON"
# when it ran past LIMIT_S seconds (default 300) or its processes past
# LIMIT_MB MiB resident (default 4096: exact profilers can keep a record per
# live block, and the machine is shared). A run that fails is tried once
# more (CPython's tests have timing-sensitive cases that can fail on a
# loaded machine); a second failure stops the script.
limit_s=${LIMIT_S:-300}
limit_mb=${LIMIT_MB:-4096}
tree_rss() { # KiB resident in the process tree under pid $1
  ps -eo pid=,ppid=,rss= | awk -v root="$1" '
    {pp[$1] = $2; rss[$1] = $3}
    END {for (p in pp) {q = p; while (q > 1 && q != root) q = pp[q]; if (q == root) t += rss[p]}; print t + 0}'
}
run1() { # prog i [extra env] [attempt] (attempt "any": a failed run is not an error)
  local p=$1 i=$2 x=${3:-} a=${4:-1} pid rc=0 stop= t0=$SECONDS
  rm -rf "$tmp/p"; mkdir -p "$tmp/p"
  (cd "$tmp" && exec /usr/bin/time -o "$tmp/time" -f '%e %U %S %M' \
      env --default-signal=INT,QUIT -u LD_PRELOAD -u MALLOC_CONF -u NALLOC_CONF ${penv[$p]} ${envs[$i]} $x \
      ${preload[$i]:+LD_PRELOAD=${preload[$i]}} \
      ${prefix[$i]} ${cmd[$p]} < "${stdin[$p]}" > "$tmp/out" 2> "$tmp/err") &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 0.5
    if [ -z "$stop" ]; then
      if [ $((SECONDS - t0)) -gt "$limit_s" ]; then stop="over ${limit_s} s"
      elif [ "$(tree_rss "$pid")" -gt $((limit_mb * 1024)) ]; then stop="over ${limit_mb} MiB resident after $((SECONDS - t0)) s"
      fi
      # the command's processes (time's children), not time itself
      [ -n "$stop" ] && pkill -KILL -P "$pid" 2>/dev/null || true
    fi
  done
  wait "$pid" || rc=$?
  if [ -n "$stop" ]; then echo "stopped $stop"; return; fi
  if [ "$rc" != 0 ] && [ "$a" = any ]; then echo "failed $rc"; return; fi
  if [ "$rc" != 0 ]; then
    echo "realprof.sh: $p under ${names[$i]} failed (attempt $a):" >&2
    tail -n 20 "$tmp/out" "$tmp/err" >&2
    if [ "$a" = 1 ]; then echo "$p ${names[$i]}" >> "$tmp/retries"; run1 "$p" "$i" "$x" 2; return; fi
    exit 1
  fi
  tail -1 "$tmp/time" | awk '{printf "%s %.2f %s\n", $1, $2 + $3, $4}'
}


declare -A t_s t_c t_rss stopped
na=${#names[@]}
for ((r = 0; r < rounds; r++)); do
  for p in "${progs[@]}"; do
    for ((k = 0; k < na; k++)); do
      i=$(( (k + r) % na ))
      [ -z "${stopped[$p,$i]:-}" ] || continue   # stopped once: not run again
      run1 "$p" "$i" > "$tmp/res"; read -r s c m < "$tmp/res"
      if [ "$s" = stopped ]; then
        stopped[$p,$i]="stopped: $c $m"
        echo "round $((r + 1))/$rounds $p ${names[$i]}: ${stopped[$p,$i]}" >&2
        continue
      fi
      t_s[$p,$i]+="$s "; t_c[$p,$i]+="$c "; t_rss[$p,$i]+="$m "
      echo "round $((r + 1))/$rounds $p ${names[$i]}: $s s, cpu $c s, $m KiB" >&2
    done
  done
done

idx() { local i; for i in "${!names[@]}"; do [ "${names[$i]}" = "$1" ] && { echo "$i"; return; }; done; }

if [ "$rounds" -gt 0 ]; then
echo "Wall time, CPU time (user+sys of all the processes) and peak RSS of the largest process, medians of $rounds alternated rounds; ratios to unprofiled nalloc and to the same allocator unprofiled (heaptrack: to glibc). On a shared machine CPU time is the steadier of the two times:"
echo
echo "| program | configuration | wall (s) | x nalloc | CPU (s) | x nalloc | x own allocator | peak RSS (MiB) | x nalloc | x own allocator |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
med() { printf '%s\n' $1 | median; }
for p in "${progs[@]}"; do
  n0=$(idx nalloc)
  ts0=$(med "${t_s[$p,$n0]}"); c0=$(med "${t_c[$p,$n0]}"); rs0=$(med "${t_rss[$p,$n0]}")
  for i in "${!names[@]}"; do
    if [ -n "${stopped[$p,$i]:-}" ]; then
      echo "| $p | ${names[$i]} | ${stopped[$p,$i]} | | | | | | | |"
      continue
    fi
    b=$(idx "${base[$i]}")
    ts=$(med "${t_s[$p,$i]}"); c=$(med "${t_c[$p,$i]}"); rs=$(med "${t_rss[$p,$i]}")
    cb=$(med "${t_c[$p,$b]}"); rb=$(med "${t_rss[$p,$b]}")
    awk -v p="$p" -v n="${names[$i]}" -v ts="$ts" -v c="$c" -v rs="$rs" -v ts0="$ts0" -v c0="$c0" -v rs0="$rs0" -v cb="$cb" -v rb="$rb" \
      'BEGIN {printf "| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.2f | %.2f |\n", p, n, ts, ts / ts0, c, c / c0, c / cb, rs / 1024, rs / rs0, rs / rb}'
  done
done
echo
for p in "${progs[@]}"; do echo "- \`$p\`: ${desc[$p]}"; done
echo "- nalloc: \`$lib\`; profiled runs write their profile at exit (\`prof_final:true\`, jemalloc likewise; heaptrack: \`heaptrack -o\`, its time includes its own processing)."
for n in "${notes[@]}"; do echo "- $n"; done
if [ -s "$tmp/retries" ]; then
  echo "- failed once and passed when run again: $(sort "$tmp/retries" | uniq -c | awk '{$1 = $1 "x"; print}' | paste -sd, -)"
fi
echo
echo "$(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg) at the end of the timed runs; $(date -u '+%Y-%m-%d %H:%M UTC')."
fi   # R=0: only the profile check below

# Is nalloc's exact profile sane? One more exact run per program, with
# nalloc's statistics printed at exit: the profile's live objects and
# bytes beside nalloc's count of live blocks (nmalloc - ndalloc) and bytes
# (allocated: slot sizes, so >= requested); its allocations beside nmalloc;
# and whether google-pprof and nalloc-prof read it.
echo
echo "nalloc's exact profile at exit beside nalloc's own statistics (\`stats_print:true\`), one run each:"
echo
echo "| program | profile: live objects | live bytes | allocated objects | stats: live blocks | allocated bytes | nmalloc | google-pprof reads it | nalloc-prof reads it |"
echo "|---|---:|---:|---:|---:|---:|---:|---|---|"
x=$(idx "nalloc exact (lg_prof_sample:0)")
fails=()
for p in "${progs[@]}"; do
  # stats_print writes to stderr in every process, child processes included:
  # tests that compare a child's stderr with nothing fail then (CPython's
  # test_json), which is no error of the profile's
  run1 "$p" "$x" "NALLOC_CONF=prof:true,lg_prof_sample:0,prof_final:true,prof_prefix:$tmp/p/nx,stats_print:true" any > "$tmp/res"
  st=$(cat "$tmp/res")
  case $st in failed*) fails+=("$p: the program exited with status ${st#failed } in this run (stats_print's output on its children's stderr)");; esac
  # the largest final profile is the program's (heaptrack-like helpers: none here)
  f=$(ls -S "$tmp"/p/nx.*.f.heap 2>/dev/null | head -1)
  [ -n "$f" ] || { echo "realprof.sh: $p: nalloc wrote no exact profile" >&2; exit 1; }
  read -r lo lb ao < <(awk 'NR == 1 {gsub(/[\[\]:]/, " "); print $3, $4, $5; exit}' "$f")
  st=$(grep -m1 '<nalloc>: stats:' "$tmp/err" || true)
  sa=$(sed -n 's/.* allocated=\([0-9]*\).*/\1/p' <<<"$st")
  nm=$(sed -n 's/.* nmalloc=\([0-9]*\).*/\1/p' <<<"$st")
  nd=$(sed -n 's/.* ndalloc=\([0-9]*\).*/\1/p' <<<"$st")
  gp=-
  if command -v google-pprof >/dev/null; then
    gp=$(google-pprof --text "${exe[$p]}" "$f" 2>/dev/null | awk '/^Total:/ {print "yes: Total " $2 " " $3; ok = 1} END {if (!ok) print "NO"}')
  fi
  np=-
  if [ -n "$nprof" ]; then
    np=$("$nprof" top -n 3 --exe="${exe[$p]}" "$f" >/dev/null 2>&1 && echo yes || echo NO)
  fi
  [ "${lb:-0}" -gt 0 ] || echo "realprof.sh: $p: exact profile with no live bytes ($f)" >&2
  echo "| $p | $lo | $lb | $ao | $((nm - nd)) | $sa | $nm | $gp | $np |"
done
echo
for f in "${fails[@]}"; do echo "- $f"; done
echo "- stats: the first \`<nalloc>: stats:\` line on stderr (with child processes, the first process to exit); profile: the largest final profile written."
