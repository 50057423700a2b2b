#!/usr/bin/env bash
# The test command: installs dependencies, then builds and runs the ctest
# suites five times: a normal build (all tests), a debug build (nalloc's
# assertions and lock-order checks on; all tests but the bench), an UBSan
# build (all tests), an ASan build (the allocator, threaded and profiler
# tests) and a TSan build (the threaded tests); ASan and TSan own malloc, so
# those two test nalloc through the nalloc_-prefixed library. Every build
# treats warnings as errors.
#   tests/run.sh            everything
#   tests/run.sh --quick    the normal build only
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
bash tests/deps.sh
jobs=$(nproc)
out=${NALLOC_TEST_BUILD:-$top/build-test}
status=0

run() { # name, cmake args..., then -- ctest args...
  local name=$1; shift
  local cargs=() targs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do cargs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  targs=("$@")
  echo "=== $name build ==="
  cmake -S "$top" -B "$out/$name" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNALLOC_WERROR=ON "${cargs[@]}" >/dev/null
  cmake --build "$out/$name" -j"$jobs" 2>&1 | grep -E "warning|error" || true
  if ! cmake --build "$out/$name" -j"$jobs" >/dev/null; then
    echo "=== $name: build failed ==="; status=1; return
  fi
  echo "=== $name tests ==="
  ctest --test-dir "$out/$name" --output-on-failure -j"$jobs" "${targs[@]}" || status=1
}

run release -DNALLOC_BUILD_BENCH=ON -DNALLOC_BUILD_TOOLS=ON --
if [ "${1:-}" != "--quick" ]; then
  run debug -DNALLOC_DEBUG=ON -DNALLOC_BUILD_BENCH=OFF -- -LE "bench"
  run ubsan -DNALLOC_SANITIZE=undefined -DNALLOC_BUILD_BENCH=OFF -- -LE "bench|slow"
  run asan -DNALLOC_SANITIZE=address -DNALLOC_BUILD_BENCH=OFF -- -L "alloc|threads|prof|tools"
  run tsan -DNALLOC_SANITIZE=thread -DNALLOC_BUILD_BENCH=OFF -DNALLOC_BUILD_TOOLS=OFF -- -L threads
fi
exit $status
