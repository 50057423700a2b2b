/* os.c -- the OS layer: mapping, unmapping, purging and populating pages,
 * and the clock.
 * Everything above asks for memory here and nowhere else. */
#define _GNU_SOURCE /* mremap */
#include "os.h"

#include <errno.h>

#include <sys/mman.h>
#include <time.h>

/* No MAP_NORESERVE: the kernel's overcommit policy judges every mapping,
 * as it does glibc's, so a request that cannot be backed (malloc(2^40) on
 * a 24 GiB machine under the default heuristic; anything past the commit
 * limit under vm.overcommit_memory=2) fails with ENOMEM instead of
 * succeeding and faulting later. */
void *os_map(size_t size) {
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    errno = ENOMEM;
    return NULL;
  }
  return p;
}

void os_unmap(void *p, size_t size) { munmap(p, size); }

/* Address space for a mapping to be moved to: PROT_NONE, so it is no
 * commit charge until os_move puts a mapping there. */
void *os_reserve(size_t size) {
  void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* Moves a whole mapping of `old` bytes onto `dest` (from os_reserve),
 * grown to `size`: its pages go along without a copy, the rest reads as
 * zero. False (nothing changed; dest still reserved) if the kernel
 * refuses, as its overcommit policy may for the growth. */
bool os_move(void *p, size_t old, size_t size, void *dest) {
  int saved = errno;
  void *q = mremap(p, old, size, MREMAP_MAYMOVE | MREMAP_FIXED, dest);
  errno = saved;
  return q != MAP_FAILED;
}

void os_purge(void *p, size_t size) { madvise(p, size, MADV_DONTNEED); }

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Touching a fresh page one at a time costs a fault each: ~11 us on this
 * project's VMs, against 0.8-3 us a page when one madvise faults a run of
 * them in (bench/pagefault.c). Only a hint: a kernel without it (EINVAL) is not
 * asked again, and pages it could not populate fault on first touch as
 * they would have anyway. */
void os_populate(void *p, size_t size) {
  static _Atomic bool unsupported;
  if (atomic_load_explicit(&unsupported, memory_order_relaxed)) return;
  int saved = errno;
  if (madvise(p, size, MADV_POPULATE_WRITE) != 0 && errno == EINVAL)
    atomic_store_explicit(&unsupported, true, memory_order_relaxed);
  errno = saved;
}

uint64_t nalloc_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* MADV_FREE: the kernel may take the pages when it needs memory, and until
 * it does they stay mapped and resident, so writing them again costs no
 * fault (a first-touch fault is ~11 us a page on this project's VMs,
 * against ~0.2 us a page for this call). What they read afterwards is
 * their old contents or zeros. False when the kernel has no MADV_FREE
 * (before 4.5): the caller keeps the pages as they were. */
bool os_purge_lazy(void *p, size_t size) {
  static _Atomic bool unsupported;
  if (atomic_load_explicit(&unsupported, memory_order_relaxed)) return false;
  int saved = errno;
  bool ok = madvise(p, size, MADV_FREE) == 0;
  if (!ok && errno == EINVAL)
    atomic_store_explicit(&unsupported, true, memory_order_relaxed);
  errno = saved;
  return ok;
}
