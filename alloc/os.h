/* os.h -- the OS layer: every page nalloc uses is mapped, purged or
 * faulted in here, and nowhere else. */
#ifndef NALLOC_OS_H
#define NALLOC_OS_H

#include "compiler.h"

void *os_map(size_t size);              /* NULL (errno ENOMEM) on failure */
void os_unmap(void *p, size_t size);
/* Moving a mapping, pages and all (mremap): reserve the destination (no
 * commit charge), give it page-map entries, then move and grow onto it. */
void *os_reserve(size_t size);
bool os_move(void *p, size_t old, size_t size, void *dest);
bool os_map_at(void *p, size_t size); /* fresh pages over reserved ones */
void os_purge(void *p, size_t size);    /* MADV_DONTNEED: pages read back as 0 */
/* Ranges to purge (MADV_DONTNEED) together: one process_madvise call for
 * up to OS_BATCH_MAX of them, whose TLB flush (an IPI to every other core
 * that runs one of the process's threads) the kernel makes once for the
 * call instead of once a range. A caller adds ranges as it finds them and
 * flushes before anything may write them again. Where the kernel has no
 * process_madvise for its own process (before 6.13, or a seccomp filter
 * refuses it), each range is one madvise, as os_purge. */
#define OS_BATCH_MAX 64
typedef struct {
  unsigned n;
  struct {
    void *base;
    size_t len;
  } v[OS_BATCH_MAX]; /* laid out as struct iovec */
} os_batch_t;
/* Empty; no initializer, which would zero the whole array. */
static inline void os_batch_init(os_batch_t *b) { b->n = 0; }
/* Adds [p, p + size) (merged with the last range when they touch; the
 * batch is flushed first when full); true when the range opened a batch:
 * a system call more. */
bool os_purge_add(os_batch_t *b, void *p, size_t size);
void os_purge_flush(os_batch_t *b); /* purges what was added; b is empty */
/* The process's kernel mappings (lines of /proc/self/maps; SIZE_MAX if it
 * cannot be read) and the most it may have (vm.max_map_count). */
size_t os_vma_count(void);
size_t os_vma_max(void);
void os_populate(void *p, size_t size); /* fault fresh pages in, in one call */
uint64_t nalloc_now_ns(void);           /* CLOCK_MONOTONIC */
/* Time stamps for the lifetimes of sampled blocks (the profiler's
 * histogram): the TSC where it is invariant (rdtsc, ~25 cycles), else
 * nalloc_now_ns. os_stamp_boot (the profiler's start) picks one and, for
 * the TSC, notes the clock; os_stamp_ns turns two stamps into the
 * nanoseconds between them (0 when `to` is not after `from`). */
void os_stamp_boot(void);
extern bool os_stamp_tsc;
static inline uint64_t os_stamp(void) {
#if defined(__x86_64__)
  if (likely(os_stamp_tsc)) return __builtin_ia32_rdtsc();
#endif
  return nalloc_now_ns();
}
uint64_t os_stamp_ns(uint64_t from, uint64_t to);
/* TSC stamps: ns per tick << 32, once measured (os.c); 0 before, and
 * always without the TSC. */
extern _Atomic uint64_t os_stamp_mult;
__extension__ typedef unsigned __int128 os_u128;
/* os_stamp_ns with its common case inline: every sampled free with a
 * birth converts (the call, its checks and its return were ~17 of its ~25
 * instructions on bench-random). */
static inline uint64_t os_stamp_ns_inline(uint64_t from, uint64_t to) {
#if defined(__x86_64__)
  uint64_t m = atomic_load_explicit(&os_stamp_mult, memory_order_relaxed);
  if (likely(m != 0 && to > from))
    return (uint64_t)(((os_u128)(to - from) * m) >> 32);
#endif
  return os_stamp_ns(from, to);
}
/* An asymmetric fence (membarrier, private expedited): every thread of the
 * process that runs meanwhile passes a full memory barrier, so a thread
 * whose own side is only a compiler barrier is ordered against the
 * caller. os_fence_register once first, from any thread; false (either)
 * where the kernel or a seccomp filter refuses. */
bool os_fence_register(void);
bool os_fence_all(void);
/* MADV_FREE: resident until the kernel needs the memory, no fault when
 * written again; false if the kernel cannot. */
bool os_purge_lazy(void *p, size_t size);

#endif
