#!/usr/bin/env bash
# bench/startup.sh -- what an allocator costs a process that does almost
# nothing: the shells, `cat`s and `sed`s of a build or a script, where
# nalloc sits in LD_PRELOAD (or /etc/ld.so.preload) for every process.
#
#   bench/startup.sh [LIBNALLOC] [N]
#   BASE=/path/to/older/libnalloc.so bench/startup.sh ...   adds a row for it
#
# For glibc, nalloc, nalloc with prof:true and each peer installed: the
# time per process of /bin/true and of `cat` on a small file, started N
# times (default 2000) in a shell loop, in R=5 alternated rounds (every
# allocator once per round, so a slow phase of the shared machine hits all
# of them); the median per-process time of the rounds; the system calls of
# one run (strace -f, when installed); the instructions of one /bin/true
# and one `cat`, loader included (valgrind --tool=callgrind, when
# installed: repeatable where times are not); the peak RSS of one `cat`
# (/usr/bin/time, when installed). Prints a markdown table.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lib=${1:-$here/../build/libnalloc.so}
n=${2:-2000}
rounds=${R:-5}
lib=$(readlink -f "$lib")
[ -f "$lib" ] || { echo "startup.sh: no $lib (build nalloc first)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c 4096 /dev/urandom | base64 > "$tmp/in.txt"

find_lib() { # the first of the names that the loader can find
  local d f
  for f in "$@"; do
    for d in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib /usr/local/lib; do
      [ -e "$d/$f" ] && { echo "$d/$f"; return; }
    done
  done
}

names=(glibc nalloc "nalloc prof:true")
preload=("" "$lib" "$lib")
conf=("" "" "prof:true")
if [ -n "${BASE:-}" ]; then
  names+=("nalloc (BASE)"); preload+=("$(readlink -f "$BASE")"); conf+=("")
fi
for peer in "jemalloc libjemalloc.so.2" "tcmalloc libtcmalloc_minimal.so.4" \
            "mimalloc libmimalloc.so.2"; do
  set -- $peer
  p=$(find_lib "$2")
  [ -n "$p" ] || continue
  names+=("$1"); preload+=("$p"); conf+=("")
done

# seconds for n starts of the command, under allocator i
run_n() { # i n cmd...
  local i=$1 k=$2; shift 2
  local t0 t1
  t0=$(date +%s.%N)
  LD_PRELOAD=${preload[$i]} NALLOC_CONF=${conf[$i]} bash -c '
    k=$1; shift
    for ((j = 0; j < k; j++)); do "$@" >/dev/null; done' _ "$k" "$@"
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{printf "%.6f\n", $2 - $1}'
}

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

declare -A t_true t_cat
for ((r = 0; r < rounds; r++)); do
  for i in "${!names[@]}"; do
    t_true[$i]+="$(run_n "$i" "$n" /bin/true) "
    t_cat[$i]+="$(run_n "$i" "$n" cat "$tmp/in.txt") "
  done
done

# instructions of one run of the command (callgrind, children followed)
instr() { # i cmd...
  local i=$1; shift
  command -v valgrind >/dev/null || { echo -; return; }
  valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$tmp/cg.%p" \
    env LD_PRELOAD=${preload[$i]} NALLOC_CONF=${conf[$i]} "$@" 2>&1 >/dev/null |
    awk '/I *refs:/ {gsub(",", "", $4); v = $4} END {print v ? v : "-"}'
  rm -f "$tmp"/cg.*
}

echo "| allocator | /bin/true (ms per process) | cat (ms per process) | instructions (/bin/true) | instructions (cat) | system calls (/bin/true) | peak RSS of cat (KiB) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for i in "${!names[@]}"; do
  mt=$(printf '%s\n' ${t_true[$i]} | median)
  mc=$(printf '%s\n' ${t_cat[$i]} | median)
  sc=-
  if command -v strace >/dev/null; then
    sc=$(LD_PRELOAD=${preload[$i]} NALLOC_CONF=${conf[$i]} strace -f -o "$tmp/st" /bin/true &&
         grep -vc -e '^[0-9]* *+++' -e 'exited with' "$tmp/st")
  fi
  rss=-
  if [ -x /usr/bin/time ]; then
    rss=$(LD_PRELOAD=${preload[$i]} NALLOC_CONF=${conf[$i]} /usr/bin/time -f %M \
          cat "$tmp/in.txt" 2>&1 >/dev/null | tail -1)
  fi
  it=$(instr "$i" /bin/true)
  ic=$(instr "$i" cat "$tmp/in.txt")
  awk -v name="${names[$i]}" -v t="$mt" -v c="$mc" -v n="$n" -v sc="$sc" -v rss="$rss" \
      -v it="$it" -v ic="$ic" \
    'BEGIN {printf "| %s | %.3f | %.3f | %s | %s | %s | %s |\n", name, t * 1000 / n, c * 1000 / n, it, ic, sc, rss}'
done
echo
echo "$n starts per cell, medians of $rounds alternated rounds; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)."
