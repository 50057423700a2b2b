#!/bin/sh
# http_fuzz.sh FUZZER SEEDS DICT WORKDIR SECONDS -- runs the request-parser
# fuzzer (http_req_fuzz.c) for a bounded time on a copy of the seeds.
# Exits 77 (skipped) when clang was not found at configure time.
set -u
fuzzer=$1 seeds=$2 dict=$3 work=$4 secs=$5
if [ ! -x "$fuzzer" ]; then
  echo "SKIP: no clang with -fsanitize=fuzzer at configure time"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work/corpus" && cp "$seeds"/* "$work/corpus/" || exit 1
cd "$work" || exit 1
# -max_len 10000: longer than the 8 KiB head limit, so the limit is fuzzed.
# libFuzzer exits 77 on a crash by default, which ctest would take for
# "skipped": make it 1.
exec "$fuzzer" -max_total_time="$secs" -max_len=10000 -rss_limit_mb=2048 \
  -error_exitcode=1 -timeout_exitcode=1 \
  -dict="$dict" -print_final_stats=1 corpus
