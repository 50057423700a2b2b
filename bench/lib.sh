# bench/lib.sh -- what the shell benches share (sourced by startup.sh,
# footprint.sh and realprof.sh).

find_lib() { # the first of the names that the loader can find
  local d f
  for f in "$@"; do
    for d in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib /usr/local/lib; do
      [ -e "$d/$f" ] && { echo "$d/$f"; return; }
    done
  done
}

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
