#!/usr/bin/env bash
# Demo of nalloc's main job: profile a program's heap with no rebuild.
# Installs dependencies, builds nalloc, runs tools/demo/leaky.c under
# LD_PRELOAD with exact profiling, and shows where the memory is held.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/deps.sh
b=${NALLOC_DEMO_BUILD:-build}
cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNALLOC_BUILD_TESTS=OFF -DNALLOC_BUILD_BENCH=OFF >/dev/null
cmake --build "$b" -j"$(nproc)" >/dev/null
cc -g -O1 -fno-omit-frame-pointer tools/demo/leaky.c -o "$b/demo-leaky"
rm -f "$b"/demo.*.heap
echo "== running: NALLOC_CONF=prof:true,lg_prof_sample:0,prof_final:true LD_PRELOAD=$b/libnalloc.so $b/demo-leaky"
NALLOC_CONF=prof:true,lg_prof_sample:0,prof_final:true,prof_prefix:"$b"/demo \
  LD_PRELOAD="$(cd "$b" && pwd)/libnalloc.so" "$b/demo-leaky"
heap=$(ls "$b"/demo.*.f.heap)
echo "== profile: $heap"
if [ -x "$b/tools/nalloc-prof" ]; then
  echo "== nalloc-prof top"
  "$b/tools/nalloc-prof" top "$heap" | head -15
  "$b/tools/nalloc-prof" flamegraph "$heap" > "$b/demo-flamegraph.svg"
  echo "== flamegraph: $b/demo-flamegraph.svg (open it in a browser)"
fi
echo "== google-pprof --text"
google-pprof --text "$b/demo-leaky" "$heap" 2>/dev/null | head -12
