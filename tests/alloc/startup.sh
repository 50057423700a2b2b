#!/usr/bin/env bash
# startup.sh PROG -- the system calls nalloc makes at start-up (issue 12),
# counted by strace -f around PROG (tests/alloc/startup.c, linked with
# libnalloc) in each of its modes. Skipped (77) without a working strace.
#
# Without an explicit arena or node count, a process that allocates in one
# thread never asks for the NUMA topology (get_mempolicy,
# sched_getaffinity), never calls gettid (lock owners are counted ids) and
# populates nothing ahead (madvise); a second thread or nalloc_ctl makes it
# discover, and an explicit narenas discovers at boot. (A second arena's
# first spans may be populated: madvise is checked in one thread only.)
set -u
prog=$1
command -v strace >/dev/null || { echo "startup: no strace, skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
strace -f -o "$tmp/probe" true 2>/dev/null || { echo "startup: strace cannot trace here, skipped"; exit 77; }

fail=0
# calls MODE CONF: "get_mempolicy sched_getaffinity gettid madvise" counts
calls() {
  NALLOC_CONF=$2 strace -f -qq -o "$tmp/st" \
    -e trace=get_mempolicy,sched_getaffinity,gettid,madvise "$prog" "$1" ||
    { echo "startup: $prog $1 (NALLOC_CONF=$2) failed"; fail=1; }
  local c out=""
  for c in get_mempolicy sched_getaffinity gettid madvise; do
    out+="$(grep -c "$c(" "$tmp/st") "
  done
  echo "${out% }"
}
expect() { # MODE CONF WANT (a pattern for the four counts)
  local got
  got=$(calls "$1" "$2")
  if [[ $got == $3 ]]; then
    echo "startup: $1 (NALLOC_CONF=$2): $got ok"
  else
    echo "startup: $1 (NALLOC_CONF=$2): get_mempolicy sched_getaffinity gettid madvise = $got, want $3"
    fail=1
  fi
}
expect none "" "0 0 0 0"
expect malloc "" "0 0 0 0"
expect thread "" "[1-9]* [1-9]* 0 *"
expect ctl "" "[1-9]* [1-9]* 0 *"
expect thread "numa:false" "0 [1-9]* 0 *"
expect malloc "narenas:2" "[1-9]* [1-9]* 0 *"
exit $fail
