/* os.c -- the OS layer: mapping, unmapping, purging and populating pages,
 * and the clock.
 * Everything above asks for memory here and nowhere else. */
#define _GNU_SOURCE /* mremap */
#include "os.h"

#include <errno.h>
#include <stdatomic.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <fcntl.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <stddef.h>
#include <time.h>
#include <unistd.h>

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

/* Fresh pages over part of a range from os_reserve (the rest of a
 * mapping whose first pages were moved there): a mapping as os_map makes
 * them, judged by the overcommit policy as they are. */
bool os_map_at(void *p, size_t size) {
  int saved = errno;
  void *q = mmap(p, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  errno = saved;
  return q != MAP_FAILED;
}

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

/* process_madvise on the caller's own process: PIDFD_SELF (Linux 6.14)
 * needs no file descriptor, and any advice is allowed there from 6.13.
 * From 6.16 the kernel flushes the TLB once for all the ranges of a call
 * (one IPI per other core that runs the process, not one per range): at
 * two threads bench-frag's hole purges were 11.5k madvise calls a thread,
 * each an IPI. */
#ifndef PIDFD_SELF_THREAD_GROUP
#define PIDFD_SELF_THREAD_GROUP (-10001)
#endif
_Static_assert(sizeof(((os_batch_t *)0)->v[0]) == sizeof(struct iovec) &&
                   offsetof(struct iovec, iov_len) == sizeof(void *),
               "os_batch_t's ranges are struct iovecs");

bool os_purge_add(os_batch_t *b, void *p, size_t size) {
  nalloc_assert(size > 0 && b->n <= OS_BATCH_MAX);
  if (b->n > 0 && (char *)b->v[b->n - 1].base + b->v[b->n - 1].len == (char *)p) {
    b->v[b->n - 1].len += size;
    return false;
  }
  if (b->n == OS_BATCH_MAX) os_purge_flush(b);
  b->v[b->n].base = p;
  b->v[b->n].len = size;
  return b->n++ == 0;
}

void os_purge_flush(os_batch_t *b) {
  static _Atomic bool unsupported;
  size_t total = 0;
  for (unsigned i = 0; i < b->n; i++) total += b->v[i].len;
  if (b->n > 1 && !atomic_load_explicit(&unsupported, memory_order_relaxed)) {
    int saved = errno;
    long r = syscall(SYS_process_madvise, PIDFD_SELF_THREAD_GROUP, (const void *)b->v,
                     (size_t)b->n, MADV_DONTNEED, 0u);
    if (r < 0 && errno != EINTR && errno != EAGAIN && errno != ENOMEM)
      atomic_store_explicit(&unsupported, true, memory_order_relaxed);
    errno = saved;
    if (r >= 0 && (size_t)r == total) {
      b->n = 0;
      return;
    }
  }
  /* one range, or the call refused or stopped short: range by range
   * (purging a range again is harmless) */
  for (unsigned i = 0; i < b->n; i++) os_purge(b->v[i].base, b->v[i].len);
  b->n = 0;
}

/* Lines of a /proc file, read without allocating; SIZE_MAX if it cannot
 * be read. The number in it when `number` is set. */
static size_t os_proc_read(const char *path, bool number) {
  int saved = errno, fd = open(path, O_RDONLY | O_CLOEXEC);
  size_t n = 0;
  char buf[4096];
  ssize_t got;
  if (fd < 0) {
    errno = saved;
    return SIZE_MAX;
  }
  while ((got = read(fd, buf, sizeof buf)) > 0)
    for (ssize_t i = 0; i < got; i++) {
      if (!number) n += buf[i] == '\n';
      else if (buf[i] >= '0' && buf[i] <= '9') n = n * 10 + (size_t)(buf[i] - '0');
      else goto done;
    }
done:
  close(fd);
  errno = saved;
  return n;
}

size_t os_vma_count(void) { return os_proc_read("/proc/self/maps", false); }

bool os_fence_register(void) {
  return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

bool os_fence_all(void) {
  return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
}

size_t os_vma_max(void) {
  size_t n = os_proc_read("/proc/sys/vm/max_map_count", true);
  return n == SIZE_MAX || n == 0 ? 65530 : n; /* the kernel's default */
}

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

/* The TSC as the stamp of sampled blocks' births and deaths: two
 * clock_gettime calls a sample were 36-48 ns each on this project's VMs,
 * and the lifetime histogram's buckets (a factor of 4 wide, from 1 us)
 * need no more than a steady count. Used only where the CPU says the TSC
 * is invariant (CPUID 0x80000007 EDX bit 8: constant rate in every
 * P-/C-state; the kernel keeps the cores' counters in step). Its rate is
 * measured against CLOCK_MONOTONIC from the boot: at each conversion
 * until 10 ms have passed (a read of each clock, ~50 ns apart, gives the
 * rate within 0.1% after 50 us), then once and for all. */
bool os_stamp_tsc;
static uint64_t stamp_t0_ns, stamp_t0_tsc;
_Atomic uint64_t os_stamp_mult; /* ns per tick << 32; 0: not yet fixed */
#define STAMP_CALIBRATE_NS 10000000u

void os_stamp_boot(void) {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (os_stamp_tsc || !__get_cpuid(0x80000000u, &a, &b, &c, &d) ||
      a < 0x80000007u || !__get_cpuid(0x80000007u, &a, &b, &c, &d) ||
      !(d & (1u << 8)))
    return;
  stamp_t0_ns = nalloc_now_ns();
  stamp_t0_tsc = __builtin_ia32_rdtsc();
  os_stamp_tsc = true;
#endif
}


uint64_t os_stamp_ns(uint64_t from, uint64_t to) {
  if (to <= from) return 0;
  if (!os_stamp_tsc) return to - from;
#if defined(__x86_64__)
  uint64_t m = atomic_load_explicit(&os_stamp_mult, memory_order_relaxed);
  if (unlikely(m == 0)) {
    uint64_t ns = nalloc_now_ns() - stamp_t0_ns;
    uint64_t ticks = __builtin_ia32_rdtsc() - stamp_t0_tsc;
    if (ticks == 0) return 0;
    m = (uint64_t)(((os_u128)ns << 32) / ticks);
    if (ns >= STAMP_CALIBRATE_NS) /* racing threads store about the same */
      atomic_store_explicit(&os_stamp_mult, m, memory_order_relaxed);
  }
  return (uint64_t)(((os_u128)(to - from) * m) >> 32);
#else
  return to - from;
#endif
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
