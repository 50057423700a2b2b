/* realloc.c -- realloc: in place when the new size keeps the block's
 * class or its pages can grow or shrink, else a new block and a copy. */
#include <errno.h>
#include <string.h>

#include "entry.h"
#include "large.h"
#include "sample.h"
#include "../prof/prof_hook.h"


/* Charges a realloc that may stay in place to the sampling countdown:
 * false (nothing charged) when the request is to be sampled. */
static bool realloc_charge(size_t size) {
  tsd_t *tsd = tsd_get();
  int64_t charge = size > ((size_t)1 << 62) ? (int64_t)1 << 62 : (int64_t)size;
  if (tsd->prof_countdown - charge < 0) return false;
  tsd->prof_countdown -= charge;
  return true;
}

/* Gives back what realloc_charge took, before a move charges the request
 * again: each realloc is one request for the countdown (charged twice, a
 * moving realloc was sampled twice as often as its bytes say). */
static void realloc_refund(size_t size) {
  tsd_get()->prof_countdown +=
      size > ((size_t)1 << 62) ? (int64_t)1 << 62 : (int64_t)size;
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

/* A sampled realloc of block p (span s) that fits where it is: counts the
 * request against the caller's stack and moves p's record to it, instead
 * of moving the block into a page run of its own (malloc_sampled), which
 * cost bench-realloc a copy of up to 64 KiB a sample (1.33x its
 * unprofiled instructions) and exact mode a copy every realloc. A small
 * span that takes the record leaves free's fast path (sample.c); only its
 * owner may do that (span_set_fast reads s->prof, then writes owner_fast,
 * unlocked), so another thread's small block still moves. False when the
 * block is to move: the caller moves it. */
static NALLOC_NOINLINE bool realloc_sampled(span_t *s, void *p, size_t size,
                                            bool taken, const void *caller) {
  tsd_t *tsd = tsd_get();
  if (tsd->reentrant != 0 || tsd->state != TSD_NOMINAL ||
      (s->kind == SPAN_SMALL &&
       (atomic_load_explicit(&s->owner, memory_order_relaxed) != tsd->heap ||
        tsd->heap == &heap_none)))
    return false;
  unsigned how = 0;
  void *tctx = prof_sample(tsd, size, caller, __builtin_frame_address(0), &how);
  if (taken) sample_release(s, p);
  if (tctx != NULL && !sample_record(s, p, tctx, size, how & PROF_TIMED))
    prof_sample_cancel(tsd, tctx, size);
  tsd->prof_last = p;
  return true;
}

/* A block grown by a quarter or less at a time to REALLOC_PAGES_MIN
 * bytes or more gets a page run of its own (from the thread's arena),
 * exactly the pages it needs, and grows in place into free pages after
 * it (large_resize); when they are taken, it moves to the best-fitting
 * free run. Its slot in a size class's span would keep the span resident
 * while a few grown buffers pass through each of the classes between
 * 4 and 64 KiB (spans of 64 KiB-1 MiB): on bench-realloc (256 buffers a
 * thread grown by 1-512 B to 1-64 KiB) peak RSS 20.9 -> 10.8 MiB at one
 * thread, 39.6 -> 19.5 at two, 239-253 -> 133-138 at 16, for 15% more
 * instructions (the copies of the moves: a block that cannot grow in
 * place moves at its next page, not its next quarter). Room on a move
 * (a quarter more pages: 13.5 MiB at one thread), choosing a run with a
 * page or a quarter to spare (11.3-12.2), moving into the free run before
 * the block (11.5), a threshold of 1 KiB (10.2, but a 1 KiB buffer in a
 * 4 KiB page) or 8 KiB (10.8, 138 at 16 threads) were tried (alloc/README.md, "Footprint of
 * the small classes"). */
#define REALLOC_PAGES_MIN ((size_t)4 << 10)

/* Large block s (a grown block, a sampled block's run, a large block)
 * may be resized to `size` where it is. */
static bool realloc_in_pages(const span_t *s, size_t size) {
  return s->kind == SPAN_LARGE && size <= MAX_REQUEST &&
         (size > SC_SMALL_MAX || size >= REALLOC_PAGES_MIN);
}

/* A block of `old` bytes growing to `size` <= SC_SMALL_MAX moves to a page
 * run of its own: it grows gradually (a quarter or less) or has one. */
static bool realloc_to_pages(const span_t *s, size_t old, size_t size) {
  return size > old && size >= REALLOC_PAGES_MIN && size <= SC_SMALL_MAX &&
         (s->kind == SPAN_LARGE || size <= old + old / 4);
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
   * never sampled). A block that stays where it is loses its record (the
   * old object is gone, as a move would free it) and, when the request is
   * sampled, takes the new one (realloc_sampled). */
  bool taken = sample_taken(s, p);
  bool run = s->kind == SPAN_LARGE && s->sample_run;
  /* it still fits, and shrinking keeps more than half of it */
  bool fits = size <= old && size > old / 2 && (s->kind == SPAN_SMALL || run);
  if (realloc_charge(size)) {
    /* A small block's page run of its own (sample_run.c) also grows in
     * place: moving it back to a span cost bench-realloc (256 buffers
     * grown by 1-512 B up to 1-64 KiB, each sampled ~4 times as it grows)
     * a copy of up to 64 KiB a sample. */
    if (fits || (run && size > old && size <= MAX_REQUEST && large_resize(s, size))) {
      if (taken) sample_release(s, p);
      return p;
    }
    if (!run && realloc_in_pages(s, size)) {
      if (large_resize(s, size)) {
        if (taken) sample_release(s, p);
        return p;
      }
      void *q = !taken && size > old && size > SC_SMALL_MAX ? large_move_grow(s, size) : NULL;
      if (q != NULL) return q;
    }
    realloc_refund(size); /* the move's malloc_room charges it */
  } else if (opt_prof) {
    if (fits && realloc_sampled(s, p, size, taken, caller)) return p;
    /* a sampled request for a block that can grow or shrink where it is
     * (exact mode: every request) takes the record there, not a copy */
    if (!fits && realloc_in_pages(s, size) && large_resize(s, size)) {
      if (!realloc_sampled(s, p, size, taken, caller) && taken) sample_release(s, p);
      return p;
    }
  }
  void *q;
  if (realloc_to_pages(s, old, size)) {
    q = malloc_grown(size, size, caller);
  } else {
    size_t room = size > old && size <= SC_SMALL_MAX ? realloc_room(old) : size;
    q = malloc_room(size, room <= SC_SMALL_MAX ? room : size, caller);
  }
  if (q == NULL) return NULL; /* the old block stays valid */
  memcpy(q, p, old < size ? old : size);
  entry_free(p, FN_REALLOC);
  return q;
}
