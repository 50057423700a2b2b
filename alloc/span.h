/* span.h -- small spans: a run of pages cut into equal slots of one size
 * class, with the free bitmap and the remote bitmap out of band.
 *
 * The free bitmap (bits[0..nwords), 1 = free) is the span's free list: pop
 * takes the lowest set bit of the cursor's word, so blocks are handed out
 * in address order, and push sets a bit. Only the span's owning heap (a
 * thread, or an arena's shared heap under its lock) writes it, with plain
 * (relaxed) loads and stores. Another thread frees by setting the slot's
 * bit in the remote bitmap with fetch_or; the owner moves remote bits into
 * the free bitmap when it runs out (span_collect). A bit set in either is
 * a free slot, so a second free of a block is seen at once, from any
 * thread: the bitmaps double as the double-free check. Nothing is ever
 * stored inside a free block, so a write after free cannot steer malloc.
 *
 * The notify protocol (states in types.h): a span whose owner has run it
 * dry leaves the owner's lists with notify = WANT; the first remote free
 * that finds WANT moves it to PUSHING, pushes the span on the owner's
 * remote queue, and sets QUEUED; the owner's drain sets NONE again. So a
 * span is on a queue at most once. An owner that goes away first waits
 * out a PUSHING (a few instructions) and sets ORPHAN, so no push ever
 * reaches a heap that is
 * gone. */
#ifndef NALLOC_SPAN_H
#define NALLOC_SPAN_H

#include "os.h"
#include "size_class.h"

/* The span of an empty heap class: no free slot, so pop always fails and
 * a heap needs no NULL check. Never in the page map. */
extern span_t span_none;

static inline _Atomic uint64_t *span_rbits(span_t *s) { return s->bits + SPAN_RBITS; }
static inline uintptr_t span_end(const span_t *s) { return s->start + s->npages * PAGE; }

/* Slot index of p in small span s, and whether p starts that slot, from
 * one multiplication: off * div_mul is (index << 40) plus, for a slot
 * start, k * (size * div_mul - 2^40) < off < SPAN_MAX_BYTES (below 2^20),
 * and for any other offset r * div_mul + ... >= 2^40 / size >= 2^24 (and
 * < 2^40). So bits 24..39 of the product are zero exactly at slot starts;
 * the index, bits 40..55, is below 2^16 (off < 2^20, div_mul <= 2^36 for
 * slots of 16 bytes or more), and bits 56..63 are zero. The index must
 * also be below nslots: the span's pages may end in a tail shorter than a
 * slot (80-byte slots in 4 KiB), or longer (nslots is capped at
 * SPAN_MAX_SLOTS), whose "slot starts" are no slots (freeing one set a bit
 * past the last slot, or past the bitmap, and malloc handed the tail out
 * across the span's end). Both checks are one compare: the product's bits
 * 24..63 rotated right by 16 put the index in the low bits and the bits
 * that must be zero on top, so that value is below nslots exactly when p
 * starts a slot whose index is below nslots, and is then the index (one
 * instruction fewer than a mask test and an index compare; the result is
 * the index only when *ok). (Other kinds of span have div_mul 0 and nslots
 * 0: no p passes.) *word: the index's bitmap word, when *ok. */
static NALLOC_ALWAYS_INLINE uintptr_t span_slot_word(const span_t *s, const void *p, bool *ok,
                                                    uintptr_t *word) {
  uint64_t prod = ((uintptr_t)p - s->start) * s->div_mul;
  uint64_t q = prod >> (SC_DIV_SHIFT - 16);
  uintptr_t r = (q >> 16) | (q << 48);
  *ok = r < s->nslots;
  /* the bitmap word straight from the product, not after the rotation:
   * two cycles fewer before the word's load (bench-fastpath's chain) */
  *word = (uintptr_t)(prod >> (SC_DIV_SHIFT + 6));
  return r;
}

static NALLOC_ALWAYS_INLINE uintptr_t span_slot(const span_t *s, const void *p, bool *ok) {
  uintptr_t w;
  return span_slot_word(s, p, ok, &w);
}

/* Owner only. The free slots of the cursor's word (0: none there)... */
static NALLOC_ALWAYS_INLINE uint64_t span_peek(span_t *s) {
  return load_rlx(s->cursor);
}

/* ...and the lowest of them, `b` being what span_peek returned. */
static NALLOC_ALWAYS_INLINE void *span_take(span_t *s, uint64_t b) {
  store_rlx(s->cursor, b & (b - 1));
  s->used++;
  s->nmalloc++;
  /* a 32-bit product (below 64 * SC_SMALL_MAX): imul takes the slot size
   * from memory (pop_size, on this line), one instruction fewer than a
   * 64-bit one */
  uintptr_t p = s->wbase + (uint32_t)((uint32_t)ctz64(b) * s->pop_size);
  if (p == 0) __builtin_unreachable(); /* spans never start at 0: no NULL test */
  return (void *)p;
}

/* Owner only: the lowest free slot of the cursor's word, or NULL. */
static NALLOC_ALWAYS_INLINE void *span_pop(span_t *s) {
  uint64_t b = span_peek(s);
  return likely(b != 0) ? span_take(s, b) : NULL;
}

static inline void span_set_cursor(span_t *s, unsigned w) {
  s->cursor = &s->bits[w];
  s->wbase = s->start + (uintptr_t)w * 64 * s->slot_size;
}

/* Owner only: points the cursor at the lowest word of the free bitmap
 * with a free slot; false if there is none (remote frees not looked at). */
static inline bool span_find_local(span_t *s) {
  for (unsigned w = 0; w < s->nwords; w++)
    if (load_rlx(&s->bits[w]) != 0) {
      span_set_cursor(s, w);
      return true;
    }
  return false;
}

enum { PUSH_DOUBLE = 0, PUSH_OK = 1, PUSH_EMPTY = 2 };

/* Owner only: frees slot i. PUSH_DOUBLE (nothing changed) when the slot
 * is already free, locally or remotely; PUSH_EMPTY when it was the last
 * slot in use. */
static NALLOC_ALWAYS_INLINE int span_push_at(span_t *s, uintptr_t i, uintptr_t w) {
  nalloc_assert(w == i >> 6);
  _Atomic uint64_t *wp = &s->bits[w];
  uint64_t x = load_rlx(wp);
  /* the remote bitmap only when a remote free may be pending (rpending,
   * on the line this free reads anyway): a single-threaded program never
   * touches its line. A double free after a remote free of the slot
   * comes after that free set rpending (the program ordered them). */
  if (unlikely(load_racy(&s->rpending)) && bt64(load_rlx(wp + SPAN_RBITS), i))
    return PUSH_DOUBLE;
  /* a shift rather than a mask, and bts64: bt and bts, three
   * instructions fewer than building the mask */
  if (unlikely((x >> (i & 63)) & 1)) return PUSH_DOUBLE;
  store_rlx(wp, bts64(x, i));
  return likely(--s->used != 0) ? PUSH_OK : PUSH_EMPTY;
}

static NALLOC_ALWAYS_INLINE int span_push(span_t *s, uintptr_t i) {
  return span_push_at(s, i, i >> 6);
}

/* Any thread: whether slot i is in use (a racy read, for the checks of
 * realloc and malloc_usable_size). */
static inline bool span_slot_live(span_t *s, uint32_t i) {
  uint64_t bit = (uint64_t)1 << (i & 63);
  return !((load_rlx(&s->bits[i >> 6]) | load_rlx(&span_rbits(s)[i >> 6])) & bit);
}

/* A new small span of class cls over `npages` pages of arena a, its slots
 * all free, mapped in the page map; NULL when the OS refuses memory. */
span_t *span_create(arena_t *a, unsigned cls, size_t npages);
/* Gives an empty span's pages back to its arena. */
void span_destroy(span_t *s);
/* Owner only, s its current span: points the cursor at a word with a
 * free slot, collecting remote frees if the free bitmap has none. False:
 * the span is full. */
bool span_find(span_t *s);
/* Owner only: moves remote frees into the free bitmap; returns how many. */
uint32_t span_collect(span_t *s);
/* span_push_remote's rare end, with notify `st` read after the bit: the
 * owner wants to hear (SN_WANT: announce the span on its queue), or is
 * gone (SN_ORPHAN: arena `ai` counts a free into an abandoned span);
 * nothing for any other state. */
void span_remote_note(span_t *s, int st, unsigned ai);

/* Any thread but the owner: frees slot i through the remote bitmap, and
 * announces the span if its owner wants to hear (span_remote_note, with
 * notify read after the bit). False: the slot was already free (nothing
 * changed). The arena is read before the bit: once it is set, the span
 * may be emptied and given back by another thread at any moment, so only
 * its atomic fields are read after (the record itself stays a span
 * record). Inline, so that the note is a tail call of the caller (issue
 * 11: as a call from free_slot_plain, each remote free paid a call, a
 * frame and a return). */
static NALLOC_ALWAYS_INLINE bool span_push_remote(span_t *s, uint32_t i) {
  uint32_t w = i >> 6;
  uint64_t bit = (uint64_t)1 << (i & 63);
  unsigned ai = s->arena;
  if (load_rlx(&s->bits[w]) & bit) return false;
  uint64_t old = atomic_fetch_or_explicit(&span_rbits(s)[w], bit, memory_order_seq_cst);
  if (old & bit) return false;
  /* the owner's frees check the remote bitmap from now on (span_push_at):
   * for the rest of the span's life, so the flag is written once, not
   * once a collection (each write takes the line of malloc's counters
   * from the owner). Set after the bit: a record recycled meanwhile only
   * gets a needless look at its remote bitmap. */
  if (!load_racy(&s->rpending)) store_rlx(&s->rpending, 1);
  int st = atomic_load_explicit(&s->notify, memory_order_seq_cst);
  if (unlikely(st == SN_WANT || st == SN_ORPHAN)) span_remote_note(s, st, ai);
  return true;
}

/* Owner only, with no free slot left: asks to hear of remote frees. False
 * if remote frees came in meanwhile (collected: the span is usable). True
 * if the span is full: it will come back through the queue. */
bool span_want(span_t *s);
/* Owner only: the span is usable again without a remote free (one of the
 * owner's own frees); takes back the wish. It stays: taking it back would
 * cost an atomic operation on every span the owner frees into while it
 * is full, which a single-threaded program does all the time. A remote
 * free into the span meanwhile just announces it once; the drain skips a
 * span no longer on the full list. */
static inline void span_unwant(span_t *s) { (void)s; }
/* Owner only, before giving back a span that emptied: no remote free may
 * announce it any more. A remote free reads notify after setting its bit,
 * and may be held up in between (preempted, or running a signal handler
 * that forks) while the owner collects that bit, empties the span and
 * gives it back: had the span kept a WANT, that free would then push a
 * span whose owner is gone (NULL). WANT goes back to NONE; a push in
 * progress is waited out. False if the span is on the queue (QUEUED):
 * the owner must drain it before the span goes. */
bool span_quiet(span_t *s);
/* Owner only, draining its queue: s was on it; it may be announced again. */
void span_dequeued(span_t *s);
/* The owner goes away (thread exit, flush, arena move): no push will
 * reach it once this returns. `alone`: fork child, no other thread. */
void span_orphan(span_t *s, bool alone);
/* A new owner (adoption): h, with frees fast unless a slot is sampled. */
void span_adopt(span_t *s, struct heap_s *h);
/* Owner only (for an abandoned span: under its arena's abandon_lock), s
 * not current: purges the pages that hold no live slot (every slot on
 * them free in the free bitmap; an uncollected remote free counts as
 * live), unless not much was freed since the last look (`always`: even
 * then). Slots keep no data the allocator needs (the bitmaps and records
 * are out of band), and only the owner hands slots out, so the pages read
 * back as zero when it next does. The pages go into b (os_purge_add),
 * which the caller flushes before s may hand out a slot again. */
void span_purge_holes(span_t *s, bool always, os_batch_t *b);
/* span_purge_holes for the decay thread, which has claimed the owner's
 * heap (heap_idle_sweep): the owner may still free slots of s on its fast
 * path meanwhile, which only adds free slots, but takes none (s is not
 * current). `used`, which those frees count down, is not read: the free
 * bitmap is counted instead. */
void span_purge_idle(span_t *s, os_batch_t *b);
/* Slots free in the free bitmap (remote frees not counted): the truth
 * that `used` caches, for whoever cannot trust or read `used`. */
uint32_t span_count_free(const span_t *s);
/* s has holes and is about to hand out slots again (its heap makes it
 * current), or goes back to the page heap: its purged pages stop being
 * counted as holes. They fault back in as the owner writes slots there;
 * not at once (MADV_POPULATE_WRITE over them): a class that comes back in
 * a short burst would fault in pages it leaves unused (bench-random -t 2
 * peak 94.3 -> 106.1 MB). */
void span_forget_holes(span_t *s);
/* The current span's free tail, in the owner's idle sweep: keeps the free
 * slots its next `keep` mallocs take (the cursor's word first, then the
 * lowest ones) and purges the whole free pages past them, counted as
 * holes. A class whose blocks once filled a big span and now keeps a few
 * live holds that span's touched pages as current span for good: at the
 * peak of CPython's threading tests 2.5 MiB of free pages sat in current
 * spans, 1.8 of them in spans less than a quarter used. False when there
 * was nothing to purge. */
bool span_purge_tail(span_t *s, uint32_t keep, os_batch_t *b);
/* s (current, with holes from span_purge_tail) has handed out too few
 * slots since for any malloc to have reached its holes... */
static inline bool span_tail_intact(const span_t *s) {
  return (int32_t)((uint32_t)s->nmalloc - s->holes_reach) < 0;
}
/* ...and when it has handed out more: a slot from the first one purged on
 * is in use now (the holes were reached for sure, not only maybe). */
bool span_tail_reached(const span_t *s);
/* When it was not (and when they are made): the holes stay, and mallocs
 * may reach them again after as many as the free slots malloc takes
 * before them now. */
void span_tail_renew(span_t *s);
/* Debug build: the bitmaps and the count agree (free + remote-pending +
 * used = slots, the current span's phantom allocation included), and s is
 * what the page map says for its pages. Owner only. */
void span_check_debug(span_t *s);
static inline void span_check(span_t *s) {
  if (NALLOC_DEBUG_ON) span_check_debug(s);
}
/* No slot of s holds a sample: never one, or (sampled mode, whose spans
 * keep births: sample.c) none live now. Only the owner records samples in
 * its span, so what it reads here stays true until it samples again. */
static inline bool span_unsampled(span_t *s) {
  return atomic_load_explicit(&s->prof, memory_order_relaxed) == NULL ||
         (load_rlx(&s->prof_births) &&
          atomic_load_explicit(&s->prof_live, memory_order_acquire) == 0);
}
/* owner_fast for owner h (NULL: none): h unless a slot of s holds a
 * sample; then h tagged in sampled mode (spans with births), NULL in
 * exact mode (most of its blocks are sampled). */
static inline void span_set_fast(span_t *s, struct heap_s *h) {
  struct heap_s *f = h;
  if (h != NULL && !span_unsampled(s))
    f = load_rlx(&s->prof_births) ? span_fast_tag(h) : NULL;
  store_rlx(&s->owner_fast, f);
}
/* owner_fast of a span going onto the full list of h (NULL: a shared
 * heap): span_full_tag(h) unless a slot holds a sample; then
 * span_full_live_tag(h) in sampled mode, NULL in exact mode. */
static inline void span_set_full(span_t *s, struct heap_s *h) {
  struct heap_s *f = NULL;
  if (h != NULL)
    f = span_unsampled(s)              ? span_full_tag(h)
        : load_rlx(&s->prof_births)    ? span_full_live_tag(h)
                                       : NULL;
  store_rlx(&s->owner_fast, f);
}

#endif
