#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, then builds and runs a
# consumer through pkg-config and through find_package (shared and static).
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$tmp/prefix/lib
[ -d "$libdir" ] || libdir=$(dirname "$(find "$tmp/prefix" -name nalloc.pc | head -1)")/..
export PKG_CONFIG_PATH=$(dirname "$(find "$tmp/prefix" -name nalloc.pc | head -1)")
cc -O1 "$src/consumer.c" $(pkg-config --cflags --libs nalloc) -o "$tmp/pc_consumer"
LD_LIBRARY_PATH=$(dirname "$(find "$tmp/prefix" -name 'libnalloc.so' | head -1)") "$tmp/pc_consumer"
cmake -S "$src" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cm" >/dev/null
LD_LIBRARY_PATH=$(dirname "$(find "$tmp/prefix" -name 'libnalloc.so' | head -1)") "$tmp/cm/consumer_shared"
"$tmp/cm/consumer_static"
echo "install check ok"
