#!/bin/sh
# fuzz.sh FUZZER KIND SRCDIR WORKDIR SECONDS -- runs a libFuzzer target of
# the allocator (KIND conf: conf_fuzz.c, the NALLOC_CONF parser; KIND ctl:
# ctl_fuzz.c, nalloc_ctl) for a bounded time. The dictionary and the seeds
# are made here from the option and ctl tables in SRCDIR (the same
# patterns as tests/readme_complete.py), so a key or name added to a table
# is fuzzed from its first run. Exits 77 (skipped) when clang with
# -fsanitize=fuzzer was not found at configure time.
set -u
fuzzer=$1 kind=$2 src=$3 work=$4 secs=$5
if [ ! -x "$fuzzer" ]; then
  echo "SKIP: no clang with -fsanitize=fuzzer at configure time"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work/corpus" && cd "$work" || exit 1
keys=$(grep -ho '{"[a-z_]*", *CONF_' "$src"/alloc/*.c "$src"/prof/*.c | sed 's/{"\([a-z_]*\)".*/\1/')
names=$(grep -ho '{"[a-z_#.]*", *CTL_[A-Z0-9]*,' "$src"/alloc/*.c "$src"/prof/*.c |
        sed 's/{"\([a-z_#.]*\)".*/\1/; s/#/0/g')
[ -n "$keys" ] && [ -n "$names" ] || { echo "no keys or names found in $src"; exit 1; }
i=0
if [ "$kind" = conf ]; then
  for k in $keys; do echo "\"$k\""; done > dict
  for v in true false 0 1 -1 16k 4g USR2 SIGPROF 11 dwarf fp jemalloc ',' ':'; do
    echo "\"$v\""; done >> dict
  printf 'narenas:3,tcache:false' > corpus/0
  printf 'prof:true,lg_prof_sample:0,prof_prefix:/tmp/x,prof_signal:USR2' > corpus/1
  printf ',nosuchkey:1,,tcache:maybe,' > corpus/2
  printf 'narenas:\033[31m\377,prof_unwind:fp' > corpus/3
  conf=
else
  for n in $names; do echo "\"$n\""; done > dict
  for k in $keys; do echo "\"opt.$k\""; done >> dict
  # flags 7 (old and new buffers), old and new length 8; flags 3: read
  for n in $names; do
    printf '\007\006\006%s\000\001\000\000\000\000\000\000\000' "$n" > corpus/w$i
    printf '\003\000\000%s\000' "$n" > corpus/r$i
    i=$((i + 1))
  done
  for k in $keys; do printf '\003\006\000opt.%s\000' "$k" > corpus/o$i; i=$((i + 1)); done
  # profiling on, so that the prof.* names answer
  conf=prof:true,lg_prof_sample:10
fi
# libFuzzer exits 77 on a crash by default, which ctest would take for
# "skipped": make it 1.
NALLOC_CONF=$conf exec "$fuzzer" -max_total_time="$secs" -max_len=512 -rss_limit_mb=2048 \
  -error_exitcode=1 -timeout_exitcode=1 -dict=dict -print_final_stats=1 corpus
