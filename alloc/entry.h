/* entry.h -- the bodies of the public entry points, inlined into each
 * exported name (malloc in override.c, nalloc_malloc in api.c, operator new
 * in new.c) so that each records its own caller for the profiler and the
 * fast paths cost no extra call.
 *
 * Fast paths: a small malloc pops the thread cache, a small free pushes it.
 * No lock, no atomic read-modify-write; with profiling off the only extra
 * work is the sample countdown, which never reaches zero. */
#ifndef NALLOC_ENTRY_H
#define NALLOC_ENTRY_H

#include <string.h>

#include "pagemap.h"
#include "span.h"
#include "tcache.h"

#define NALLOC_CALLER() __builtin_return_address(0)

/* `frame`: the public entry point's frame pointer (the profiler finds
 * the caller's stack from it), or NULL. */
void *malloc_slow(size_t size, size_t align, bool zero, const void *caller,
                  const void *frame);
void free_slow(void *p, span_t *s);
void free_checked(void *p, span_t *s);
void *entry_realloc(void *p, size_t size, const void *caller);
void *entry_aligned(size_t align, size_t size, int kind, int *err, const void *caller);
size_t entry_usable_size(void *p);
int entry_trim(size_t pad);
void entry_stats_print(void);

enum { ALIGNED_POSIX, ALIGNED_C11, ALIGNED_MEMALIGN, ALIGNED_VALLOC, ALIGNED_PVALLOC };

static NALLOC_ALWAYS_INLINE void *entry_alloc(size_t size, bool zero,
                                              const void *caller) {
  tsd_t *tsd = tsd_get();
  if (likely(size <= SC_SMALL_MAX)) {
    tbin_t *b = &tsd->tcache->bins[sc_index(size)];
    int64_t cd = tsd->prof_countdown - (int64_t)size;
    if (likely(b->count != 0 && cd >= 0)) {
      tsd->prof_countdown = cd;
      void *p = b->slots[--b->count];
      if (zero) memset(p, 0, size);
      return p;
    }
  }
  return malloc_slow(size, 0, zero, caller, __builtin_frame_address(0));
}

/* The checks keep a bad free from poisoning the cache (a pointer into the
 * middle of a block would be handed out again): p must start a slot of its
 * span, the span must be small with nothing sampled in it, and p must not
 * be the entry just cached (an immediate double free). slots[-1] is a
 * dummy, so the last check needs no branch on an empty bin. A pointer that
 * starts a slot but fails the rest goes to free_checked, anything else to
 * free_slow, which diagnoses it. */
static NALLOC_ALWAYS_INLINE void entry_free(void *p) {
  if (unlikely(p == NULL)) return;
  span_t *s = pagemap_get(p);
  if (likely(s != NULL && span_slot_ok(s, p))) {
    if (likely(atomic_load_explicit(&s->free_fast, memory_order_relaxed))) {
      tbin_t *b = &tsd_get()->tcache->bins[s->cls];
      void **top = b->slots + b->count;
      if (likely(b->count < b->max && top[-1] != p)) {
        *top = p;
        b->count++;
        return;
      }
    }
    free_checked(p, s);
    return;
  }
  free_slow(p, s);
}

static NALLOC_ALWAYS_INLINE void *entry_calloc(size_t n, size_t size,
                                               const void *caller) {
  size_t total;
  if (unlikely(__builtin_mul_overflow(n, size, &total))) {
    errno = ENOMEM;
    return NULL;
  }
  return entry_alloc(total, true, caller);
}

static NALLOC_ALWAYS_INLINE void *entry_reallocarray(void *p, size_t n, size_t size,
                                                     const void *caller) {
  size_t total;
  if (unlikely(__builtin_mul_overflow(n, size, &total))) {
    errno = ENOMEM;
    return NULL;
  }
  return entry_realloc(p, total, caller);
}

#endif
