#!/usr/bin/env bash
# bench/startup.sh -- what an allocator costs a process that does almost
# nothing: the shells, `cat`s and `sed`s of a build or a script, where
# nalloc sits in LD_PRELOAD (or /etc/ld.so.preload) for every process.
#
#   bench/startup.sh [LIBNALLOC] [N]
#   BASE=/path/to/older/libnalloc.so bench/startup.sh ...   adds rows for it
#                                      (unprofiled and prof:true)
#
# For glibc, nalloc, nalloc with prof:true and each peer installed: the
# time per process of /bin/true and of `cat` on a small file, started N
# times (default 2000) in a shell loop, in R=5 alternated rounds (every
# allocator once per round, so a slow phase of the shared machine hits all
# of them); the median per-process time of the rounds; the system calls of
# one run (strace -f, when installed); the instructions of one /bin/true
# and one `cat`, loader included (valgrind --tool=callgrind, when
# installed: repeatable where times are not); the peak RSS of one `cat`
# (/usr/bin/time, when installed), and the page faults of one /bin/true
# and one `cat` (ru_minflt, median of 5 runs: each fault costs ~5-11 us on
# this project's VMs, more than all the instructions). Then a build: a generated Makefile of
# M=800 small targets, each running a few tiny processes (sh -c, cat, sed,
# true: what the recipes of a real build spawn around the compiler), made
# with make -j$(nproc) under LD_PRELOAD for make and every child, in the
# same alternated rounds: median wall time and median CPU time (user +
# system of make and its children). Prints markdown tables.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lib=${1:-$here/../build/libnalloc.so}
n=${2:-2000}
rounds=${R:-5}
targets=${M:-800}
lib=$(readlink -f "$lib")
[ -f "$lib" ] || { echo "startup.sh: no $lib (build nalloc first)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c 4096 /dev/urandom | base64 > "$tmp/in.txt"

. "$here/lib.sh" # find_lib, median

names=(glibc nalloc "nalloc prof:true")
preload=("" "$lib" "$lib")
conf=("" "" "prof:true")
if [ -n "${BASE:-}" ]; then
  names+=("nalloc (BASE)" "nalloc (BASE) prof:true")
  preload+=("$(readlink -f "$BASE")" "$(readlink -f "$BASE")"); conf+=("" "prof:true")
fi
for peer in "jemalloc libjemalloc.so.2" "tcmalloc libtcmalloc_minimal.so.4" \
            "mimalloc libmimalloc.so.2"; do
  set -- $peer
  p=$(find_lib "$2")
  [ -n "$p" ] || continue
  names+=("$1"); preload+=("$p"); conf+=("")
done

# The build: every target reads the input through a pipe of sed and cat,
# under a shell of its own, and runs true; `all` depends on every target.
mk=$tmp/mk
mkdir -p "$mk"
cp "$tmp/in.txt" "$mk/in.txt"
{
  printf 'all:'
  for ((t = 0; t < targets; t++)); do printf ' t%d.out' "$t"; done
  printf '\n\nt%%.out: in.txt\n'
  printf "\t@sh -c 'sed -e s/a/b/ in.txt | cat > \$@' && /bin/true\n"
} > "$mk/Makefile"

# "wall cpu" seconds of one build under allocator i (outputs removed first)
run_make() { # i
  local i=$1
  rm -f "$mk"/t*.out
  LD_PRELOAD=${preload[$i]} NALLOC_CONF=${conf[$i]} /usr/bin/time -f '%e %U %S' \
    -o "$tmp/mtime" make -s -C "$mk" -j"$(nproc)" all >/dev/null
  awk '{printf "%s %.2f\n", $1, $2 + $3}' "$tmp/mtime"
}

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


declare -A t_true t_cat m_wall m_cpu
for ((r = 0; r < rounds; r++)); do
  for i in "${!names[@]}"; do
    t_true[$i]+="$(run_n "$i" "$n" /bin/true) "
    t_cat[$i]+="$(run_n "$i" "$n" cat "$tmp/in.txt") "
    if [ -x /usr/bin/time ] && command -v make >/dev/null; then
      read -r w c < <(run_make "$i")
      m_wall[$i]+="$w "
      m_cpu[$i]+="$c "
    fi
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

# system calls of one run of the command (strace -f), exit_group included
nsys() { # i cmd...
  local i=$1; shift
  command -v strace >/dev/null || { echo -; return; }
  LD_PRELOAD=${preload[$i]} NALLOC_CONF=${conf[$i]} strace -f -o "$tmp/st" "$@" >/dev/null &&
    grep -vc -e '^[0-9]* *+++' -e 'exited with' "$tmp/st"
}

# page faults of one run of the command (minor faults, median of 5 runs)
nflt() { # i cmd...
  local i=$1; shift
  [ -x /usr/bin/time ] || { echo -; return; }
  for _ in 1 2 3 4 5; do
    LD_PRELOAD=${preload[$i]} NALLOC_CONF=${conf[$i]} /usr/bin/time -f %R -o "$tmp/flt" \
      "$@" >/dev/null
    cat "$tmp/flt"
  done | median
}

echo "| allocator | /bin/true (ms per process) | cat (ms per process) | instructions (/bin/true) | instructions (cat) | system calls (/bin/true) | system calls (cat) | page faults (/bin/true) | page faults (cat) | peak RSS of cat (KiB) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for i in "${!names[@]}"; do
  mt=$(printf '%s\n' ${t_true[$i]} | median)
  mc=$(printf '%s\n' ${t_cat[$i]} | median)
  sc=$(nsys "$i" /bin/true)
  scc=$(nsys "$i" cat "$tmp/in.txt")
  rss=-
  if [ -x /usr/bin/time ]; then
    rss=$(LD_PRELOAD=${preload[$i]} NALLOC_CONF=${conf[$i]} /usr/bin/time -f %M \
          cat "$tmp/in.txt" 2>&1 >/dev/null | tail -1)
  fi
  ft=$(nflt "$i" /bin/true)
  fc=$(nflt "$i" cat "$tmp/in.txt")
  it=$(instr "$i" /bin/true)
  ic=$(instr "$i" cat "$tmp/in.txt")
  awk -v name="${names[$i]}" -v t="$mt" -v c="$mc" -v n="$n" -v sc="$sc" -v scc="$scc" \
      -v rss="$rss" -v it="$it" -v ic="$ic" -v ft="$ft" -v fc="$fc" \
    'BEGIN {printf "| %s | %.3f | %.3f | %s | %s | %s | %s | %s | %s | %s |\n", name, t * 1000 / n, c * 1000 / n, it, ic, sc, scc, ft, fc, rss}'
done
echo
echo "$n starts per cell, medians of $rounds alternated rounds; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)."
if [ -n "${m_wall[0]:-}" ]; then
  echo
  echo "| allocator | make -j$(nproc), $targets targets: wall (s) | ÷ glibc | CPU, user + system (s) | ÷ glibc |"
  echo "|---|---:|---:|---:|---:|"
  w0=$(printf '%s\n' ${m_wall[0]} | median)
  c0=$(printf '%s\n' ${m_cpu[0]} | median)
  for i in "${!names[@]}"; do
    w=$(printf '%s\n' ${m_wall[$i]} | median)
    c=$(printf '%s\n' ${m_cpu[$i]} | median)
    awk -v name="${names[$i]}" -v w="$w" -v c="$c" -v w0="$w0" -v c0="$c0" \
      'BEGIN {printf "| %s | %.2f | %.2f | %.2f | %.2f |\n", name, w, w / w0, c, c / c0}'
  done
  echo
  echo "Each target: make's shell runs sh -c 'sed ... | cat > out' && /bin/true (5 processes); medians of $rounds alternated rounds."
fi

# The library's RELRO segment: every page of it is written by the loader
# (relocations, then mprotect) in every process, one page fault each; the
# tables of the option and ctl rows fill it to just under two pages
# (alloc/README.md, "Start-up").
relro_pages() { # lib
  command -v readelf >/dev/null || return 0
  local v s
  read -r v s < <(readelf -lW "$1" | awk '$1 == "GNU_RELRO" {print $3, $6}')
  [ -n "${v:-}" ] || return 0
  echo "$(basename "$1"): GNU_RELRO $((s)) bytes, $(( (v + s + 4095) / 4096 - v / 4096 )) pages"
}
echo
relro_pages "$lib"
[ -z "${BASE:-}" ] || relro_pages "$(readlink -f "$BASE")"
