/* realloc.c -- realloc: in place when the new size keeps the block's
 * class or its pages can grow or shrink, else a new block and a copy. */
#include <errno.h>
#include <string.h>

#include "entry.h"
#include "large.h"
#include "sample.h"


/* Charges a realloc that may stay in place to the sampling countdown:
 * false (nothing charged) when the request is to be sampled. */
static bool realloc_charge(size_t size) {
  tsd_t *tsd = tsd_get();
  int64_t charge = size > ((size_t)1 << 62) ? (int64_t)1 << 62 : (int64_t)size;
  if (tsd->prof_countdown - charge < 0) return false;
  tsd->prof_countdown -= charge;
  return true;
}

/* Room for a small block of `old` bytes that grows out of its slot: a
 * quarter more, so a buffer grown a little at a time moves once per 25% of
 * growth whatever the class spacing (tcmalloc does the same), rounded up
 * to a quarter step of its doubling (1280, 1536, 1792, 2048, 2560, ...).
 * Above 1 KiB the classes are eighth steps; growth that may land on any of
 * them leaves a partly used span in each of the 48 classes between 1 and
 * 64 KiB, where growth on quarter steps leaves one in 24. Quarter steps
 * are classes at every size (below 128 B every 16-byte step is). On
 * bench-realloc (256 buffers a thread grown by 1-512 B up to 1-64 KiB),
 * peak RSS 25.8 -> 21.5 MiB at one thread, 46.9 -> 40.8 at two, 312 ->
 * 252 at 16 (seeds 2-4 at one thread: 23.8-25.4 -> 18.9-22.0). A block
 * that grows by more than a quarter at once gets the class of its new
 * size: that is one move, not a pattern to amortize. */
static size_t realloc_room(size_t old) {
  size_t room = old + old / 4;
  if (room <= 128) return room;
  size_t step = (size_t)1 << (63 - __builtin_clzll((unsigned long long)room) - 2);
  return (room + step - 1) & ~(step - 1);
}

void *entry_realloc(void *p, size_t size, const void *caller) {
  if (p == NULL) {
    void *q = entry_alloc_fast(size, false);
    return q != NULL ? q : malloc_slow(size, 0, false, caller, NULL);
  }
  if (size == 0) {
    entry_free(p, FN_REALLOC);
    return NULL;
  }
  uint32_t i;
  span_t *s = span_checked(FN_REALLOC, p, &i);
  size_t old = s->kind == SPAN_SMALL ? s->slot_size : s->usize;
  /* A realloc is an allocation of `size` for the sampling countdown,
   * whether or not the block moves (else a block that grows in place is
   * never sampled). A sampled request, like a sampled object (whose record
   * must go to the realloc caller's stack), takes the moving path, where
   * malloc_room charges the countdown itself. */
  bool taken = sample_taken(s, p);
  if (s->kind == SPAN_LARGE && s->sample_run && size <= old && size > old / 2 &&
      realloc_charge(size)) {
    /* A small block's page run of its own (sample_run.c) that still fits,
     * the request not sampled: the sampled object is gone (its record
     * goes, as a move would free it) and an unsampled one of `size` stays
     * in the run. Moving it back to a span at once cost bench-realloc
     * (buffers grown a little at a time) two copies of up to 64 KiB a
     * sample: 1.8x its unprofiled instructions. */
    if (taken) sample_release(s, p);
    return p;
  }
  if (!taken && realloc_charge(size)) {
    /* it still fits, and shrinking keeps more than half of it */
    if (s->kind == SPAN_SMALL && size <= old && size > old / 2) return p;
    if (s->kind == SPAN_LARGE && size > SC_SMALL_MAX && size <= MAX_REQUEST) {
      if (large_resize(s, size)) return p;
      void *q = size > old ? large_move_grow(s, size) : NULL;
      if (q != NULL) return q;
    }
  }
  size_t room = size > old && size <= SC_SMALL_MAX ? realloc_room(old) : size;
  void *q = malloc_room(size, room <= SC_SMALL_MAX ? room : size, caller);
  if (q == NULL) return NULL; /* the old block stays valid */
  memcpy(q, p, old < size ? old : size);
  entry_free(p, FN_REALLOC);
  return q;
}
