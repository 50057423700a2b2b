#!/usr/bin/env bash
# bench/footprint.sh -- how much memory real programs keep under each
# allocator (issue 12): python, CPython's threading tests, sqlite3, ruby and
# perl run under LD_PRELOAD
# with glibc, nalloc and each peer installed (jemalloc, tcmalloc minimal,
# mimalloc), on the same inputs (bench/real/footprint.*).
#
#   bench/footprint.sh [LIBNALLOC]
#   R=5 bench/footprint.sh ...          rounds (default 3)
#   PROGS="sqlite3 ruby" bench/footprint.sh ...   a subset of the programs
#   VARIANTS="tcache:false dirty_decay_ms:0" bench/footprint.sh ...
#                                       adds a nalloc row per NALLOC_CONF
#   SCALE=0.5 bench/footprint.sh ...    smaller inputs (for a quick check)
#
# For each program and allocator: the peak RSS of the largest process (GNU
# time's %M: wait4's ru_maxrss, the largest of the process and its waited-for
# children) and the wall time, medians of R rounds; each round runs every
# allocator once per program, in a rotated order, so a slow phase of the
# shared machine hits all of them. Prints markdown tables: peak RSS with
# the ratio to the lowest peer (glibc, jemalloc, tcmalloc, mimalloc), and
# time with the ratio to the fastest peer. A run that exits non-zero stops
# the script with its stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lib=${1:-$here/../build/libnalloc.so}
rounds=${R:-3}
scale=${SCALE:-1}
progs=(${PROGS:-python python-threading sqlite3 ruby perl})
lib=$(readlink -f "$lib")
[ -f "$lib" ] || { echo "footprint.sh: no $lib (build nalloc first)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "footprint.sh: needs GNU time as /usr/bin/time (tests/deps.sh installs it)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$here/lib.sh" # find_lib, median

names=(glibc nalloc)
preload=("" "$lib")
conf=("" "")
notes=()
for v in ${VARIANTS:-}; do
  names+=("nalloc $v"); preload+=("$lib"); conf+=("$v")
done
for peer in "jemalloc libjemalloc.so.2" "tcmalloc libtcmalloc_minimal.so.4 libtcmalloc.so.4" \
            "mimalloc libmimalloc.so.2"; do
  set -- $peer
  n=$1; shift
  p=$(find_lib "$@")
  if [ -z "$p" ]; then notes+=("$n: not installed ($*), skipped"); continue; fi
  names+=("$n"); preload+=("$p"); conf+=("")
done

# The programs: a command line (words, run without a shell), a stdin file
# and extra environment. Inputs scale with SCALE.
sc() { awk -v a="$1" -v s="$scale" 'BEGIN {v = int(a * s + 0.5); print v < 1 ? 1 : v}'; }
py=/usr/bin/python3   # Debian's python (python3 on PATH may be another one)
declare -A cmd stdin env desc
for p in "${progs[@]}"; do
  case $p in
    python)
      [ -x $py ] || { echo "footprint.sh: no $py (apt-get install python3)" >&2; exit 2; }
      cmd[$p]="$py $here/real/footprint.py $(sc 3) 3 100000"; stdin[$p]=/dev/null
      env[$p]="PYTHONMALLOC=malloc PYTHONHASHSEED=0"
      desc[$p]="python3: 3 threads build dicts of 100k lists and strings, keep 10% for 3 rounds, $(sc 3) rounds (\`PYTHONMALLOC=malloc\`)";;
    python-threading)
      [ -x $py ] || { echo "footprint.sh: no $py (apt-get install python3)" >&2; exit 2; }
      $py -c 'import test.test_threading' 2>/dev/null ||
        { echo "footprint.sh: no CPython test suite (apt-get install libpython3.11-testsuite)" >&2; exit 2; }
      cmd[$p]="$py -m test -q -w test_threading test_threading_local test_thread"; stdin[$p]=/dev/null
      env[$p]="PYTHONMALLOC=malloc PYTHONHASHSEED=0"
      desc[$p]="python3 -m test test_threading test_threading_local test_thread: CPython's threading tests (\`PYTHONMALLOC=malloc\`; \`-w\`: a test that fails is run again, as some are timing-sensitive on a loaded machine)";;
    sqlite3)
      command -v sqlite3 >/dev/null || { echo "footprint.sh: no sqlite3 (apt-get install sqlite3)" >&2; exit 2; }
      sed "s/@N@/$(sc 1000000)/" "$here/real/footprint.sql" > "$tmp/footprint.sql"
      cmd[$p]="$(command -v sqlite3)"; stdin[$p]=$tmp/footprint.sql; env[$p]=""
      desc[$p]="sqlite3 in memory: $(sc 1000000) rows of text and blobs, 2 indexes, group by, join, delete, update, vacuum (bench/real/footprint.sql)";;
    ruby)
      command -v ruby >/dev/null || { echo "footprint.sh: no ruby (apt-get install ruby)" >&2; exit 2; }
      cmd[$p]="$(command -v ruby) $here/real/footprint.rb $(sc 6)"; stdin[$p]=/dev/null; env[$p]=""
      desc[$p]="ruby: hashes of strings and arrays, 150k entries a round, keep 1/8 for 4 rounds, $(sc 6) rounds";;
    perl)
      command -v perl >/dev/null || { echo "footprint.sh: no perl (apt-get install perl)" >&2; exit 2; }
      cmd[$p]="$(command -v perl) $here/real/footprint.pl $(sc 8)"; stdin[$p]=/dev/null; env[$p]=""
      desc[$p]="perl: hash of 300k strings a round, grown, 10% kept for 4 rounds, $(sc 8) rounds";;
    *) echo "footprint.sh: unknown program '$p' (python python-threading sqlite3 ruby perl)" >&2; exit 2;;
  esac
done

# env --default-signal: a script started in the background (`&`) has SIGINT
# ignored, and its children inherit that (CPython's test_threading checks
# interrupt_main and fails then).
# one run: prints "seconds cpu_seconds maxrss_kib". A run that fails is tried once
# more (CPython's threading tests have timing-sensitive cases that can fail
# on a loaded machine); a second failure stops the script.
run1() { # prog i [attempt]
  local p=$1 i=$2 a=${3:-1}
  if ! (cd "$tmp" && /usr/bin/time -o "$tmp/time" -f '%e %U %S %M' \
      env --default-signal=INT,QUIT -u LD_PRELOAD -u MALLOC_CONF -u NALLOC_CONF ${env[$p]} \
      ${preload[$i]:+LD_PRELOAD=${preload[$i]}} ${conf[$i]:+NALLOC_CONF=${conf[$i]}} \
      ${cmd[$p]} < "${stdin[$p]}" > "$tmp/out" 2> "$tmp/err"); then
    echo "footprint.sh: $p under ${names[$i]} failed (attempt $a):" >&2
    tail -n 20 "$tmp/out" "$tmp/err" >&2
    if [ "$a" = 1 ]; then echo "$p ${names[$i]}" >> "$tmp/retries"; run1 "$p" "$i" 2; return; fi
    exit 1
  fi
  grep -h '^[0-9]* tests\? failed\|^    test_' "$tmp/out" 2>/dev/null | grep -q . &&
    grep -A3 'failed' "$tmp/out" | grep '^    test_' | sed "s/^ */$p ${names[$i]}: /" >> "$tmp/rerun" || true
  tail -1 "$tmp/time" | awk '{printf "%s %.2f %s\n", $1, $2 + $3, $4}'
}


declare -A t_s t_c t_rss
na=${#names[@]}
for ((r = 0; r < rounds; r++)); do
  for p in "${progs[@]}"; do
    for ((k = 0; k < na; k++)); do
      i=$(( (k + r) % na ))
      run1 "$p" "$i" > "$tmp/res"; read -r s c m < "$tmp/res"
      t_s[$p,$i]+="$s "; t_c[$p,$i]+="$c "; t_rss[$p,$i]+="$m "
      echo "round $((r + 1))/$rounds $p ${names[$i]}: $s s, cpu $c s, $m KiB" >&2
    done
  done
done

is_peer() { case ${names[$1]} in glibc|jemalloc|tcmalloc|mimalloc) return 0;; esac; return 1; }

table() { # kind (rss|time)
  local kind=$1 p i v best bn
  printf '| program |'; for i in "${!names[@]}"; do printf ' %s |' "${names[$i]}"; done
  printf ' lowest peer |\n|---|'; for i in "${!names[@]}"; do printf -- '---:|'; done; printf -- '---|\n'
  for p in "${progs[@]}"; do
    declare -A med=()
    best=; bn=
    for i in "${!names[@]}"; do
      case $kind in
        rss) med[$i]=$(printf '%s\n' ${t_rss[$p,$i]} | median);;
        time) med[$i]=$(printf '%s\n' ${t_s[$p,$i]} | median);;
        cpu) med[$i]=$(printf '%s\n' ${t_c[$p,$i]} | median);;
      esac
      if is_peer "$i" && { [ -z "$best" ] || awk -v a="${med[$i]}" -v b="$best" 'BEGIN {exit !(a < b)}'; }; then
        best=${med[$i]}; bn=${names[$i]}
      fi
    done
    printf '| %s |' "$p"
    for i in "${!names[@]}"; do
      if [ "$kind" = rss ]; then
        awk -v v="${med[$i]}" -v b="$best" 'BEGIN {printf " %.1f (%.2fx) |", v / 1024, v / b}'
      else
        awk -v v="${med[$i]}" -v b="$best" 'BEGIN {printf " %.2f (%.2fx) |", v, v / b}'
      fi
    done
    printf ' %s |\n' "$bn"
  done
}

echo "Peak RSS of the largest process, MiB (ratio to the lowest peer: glibc, jemalloc, tcmalloc, mimalloc); medians of $rounds alternated rounds:"
echo
table rss
echo
echo "Wall time, s (ratio to the fastest peer), same runs:"
echo
table time
echo
echo "CPU time (user+sys), s (ratio to the fastest peer), same runs; on a shared machine the steadier of the two times:"
echo
table cpu
echo
for p in "${progs[@]}"; do echo "- \`$p\`: ${desc[$p]}"; done
for i in "${!names[@]}"; do
  [ -n "${preload[$i]}" ] && echo "- ${names[$i]}: \`${preload[$i]}\`${conf[$i]:+ with \`NALLOC_CONF=${conf[$i]}\`}"
done
for n in "${notes[@]}"; do echo "- $n"; done
if [ -s "$tmp/rerun" ]; then
  echo "- CPython tests that failed and passed when run again (\`-w\`): $(sort "$tmp/rerun" | uniq -c | awk '{$1 = $1 "x"; print}' | paste -sd, -)"
fi
if [ -s "$tmp/retries" ]; then
  echo "- failed once and passed when run again: $(sort "$tmp/retries" | uniq -c | awk '{$1 = $1 "x"; print}' | paste -sd, -)"
fi
echo
echo "$(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg) at the end; $(date -u '+%Y-%m-%d %H:%M UTC')."
