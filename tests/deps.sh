#!/usr/bin/env bash
# Installs what nalloc needs to build, test, bench and read profiles on a
# fresh Debian 12 machine. Idempotent; run as root (or via sudo).
set -euo pipefail
PKGS=(
  build-essential cmake pkg-config
  libunwind-dev libnuma-dev            # backtraces, NUMA topology/binding
  libdw-dev libelf-dev zlib1g-dev      # nalloc-prof symbolization, proto gzip
  google-perftools libgoogle-perftools-dev  # google-pprof; tcmalloc peer + HEAPPROFILE
  libjemalloc-dev libjemalloc2         # jeprof; jemalloc peer
  libmimalloc-dev                      # mimalloc peer
  golang-go                            # go tool pprof (profile reader tests)
  python3 sqlite3 xz-utils zstd        # real programs run under LD_PRELOAD
  ruby libpython3.11-testsuite         # bench/footprint.sh, bench/realprof.sh: ruby, CPython's tests
  heaptrack gnuplot-nox time           # bench: profiler peers, charts, peak RSS
  chromium                             # flamegraph SVG opened in a real browser (tests)
  binutils gzip perl                   # nalloc-prof tests: strip, objcopy, grep -P
  curl                                 # prof_http tests: the text form, unix sockets
  clang                                # prof_http_fuzz: libFuzzer (skipped without)
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
