/* span.c -- small spans: making one from an arena's pages and giving it
 * back, finding free slots, remote frees and the notify protocol, and
 * purging the free pages of a span that keeps live slots (holes) (span.h). */
#include "span.h"

#include <sched.h>
#include <string.h>

#include "arena.h"
#include "base.h"
#include "heap.h"
#include "lock.h"
#include "os.h"
#include "page_heap.h"
#include "pagemap.h"

span_t span_none = {.nwords = 1, .cursor = span_none.bits, .bits = {[SPAN_RBITS] = 0}};

/* Records are type-stable: an arena keeps the records of the spans it
 * took back for its next spans (a stale pointer from a racing double free
 * can only ever reach a span record). */
#define SPAN_REC_USED (offsetof(span_t, bits) + (SPAN_RBITS + SPAN_MAX_WORDS) * sizeof(uint64_t))
/* An odd number of lines, so that consecutive records' lines fall in
 * different L1 sets: at 8 lines (512 B) every record's first line shared
 * an eighth of the sets (cachegrind `bench-larson -t 1 -s 0.05`: D1
 * misses 11.91M at 512 B, 11.24M before the hot line moved at 448 B). */
#define SPAN_REC_BYTES (((SPAN_REC_USED / CACHELINE) | 1) * CACHELINE)
_Static_assert(SPAN_REC_BYTES >= SPAN_REC_USED, "a record holds its bitmaps");

static span_t *rec_new(arena_t *a) {
  span_t *s = a->small_recs;
  if (s != NULL) {
    a->small_recs = s->next;
    memset(s, 0, SPAN_REC_BYTES);
    return s;
  }
  return base_alloc(SPAN_REC_BYTES);
}

static void rec_delete(arena_t *a, span_t *s) {
  s->kind = SPAN_NONE;
  s->slot_size = 0;
  s->div_mul = 0;
  s->next = a->small_recs;
  a->small_recs = s;
}

static void span_init_bits(span_t *s) {
  for (unsigned w = 0; w < s->nwords; w++) {
    unsigned lo = w * 64; /* slots lo..lo+63: all, some or none exist */
    uint64_t v = lo + 64 <= s->nslots ? ~(uint64_t)0
                 : ((uint64_t)1 << (s->nslots - lo)) - 1;
    store_rlx(&s->bits[w], v);
  }
}

static void arena_list_add(arena_t *a, span_t *s) {
  s->aprev = NULL;
  s->anext = a->small_all;
  if (s->anext) s->anext->aprev = s;
  a->small_all = s;
}

static void arena_list_remove(arena_t *a, span_t *s) {
  if (s->aprev) s->aprev->anext = s->anext;
  else a->small_all = s->anext;
  if (s->anext) s->anext->aprev = s->aprev;
}

/* Pages that read as zero were never touched or were purged. A later span
 * of a busy class is about to be written slot after slot, and the next
 * spans are carved right after it: fault HEAP_POPULATE bytes in with one
 * call instead of a fault a page. A thread's first span of a class, big
 * slots, and large blocks fault as they are touched, so a process that
 * allocates little pays for no page it does not use; what this leaves
 * faulted in but unused is at most one window per arena. */
static void span_populate(arena_t *a, span_t *s, const pages_t *pg, bool later,
                          uintptr_t *from, uintptr_t *to) {
  *from = *to = 0;
  if (!pg->zeroed || !later || s->slot_size > PAGE / 4) return;
  if (s->start >= a->pop_lo && span_end(s) <= a->pop_hi) return;
  *from = s->start;
  *to = *from + HEAP_POPULATE < pg->chunk_hi ? *from + HEAP_POPULATE : pg->chunk_hi;
  if (*to < span_end(s)) *to = span_end(s);
  a->pop_lo = *from;
  a->pop_hi = *to;
}

span_t *span_create(arena_t *a, unsigned cls, size_t npages) {
  const sc_info_t *sc = &sc_info[cls];
  unsigned nslots = sc_nslots(cls, npages), nwords = (nslots + 63) / 64;
  uintptr_t from, to;
  pages_t pg;
  nlock_lock(&a->heap_lock);
  span_t *s = rec_new(a);
  if (s == NULL || !pheap_alloc(a, npages, 0, &pg)) {
    if (s) rec_delete(a, s);
    nlock_unlock(&a->heap_lock);
    return NULL;
  }
  s->start = pg.start;
  s->npages = npages;
  s->chunk_lo = pg.chunk_lo;
  s->chunk_hi = pg.chunk_hi;
  s->zeroed = pg.zeroed;
  s->arena = (uint16_t)a->index;
  s->kind = SPAN_SMALL;
  s->cls = (uint8_t)cls;
  s->slot_size = sc->size;
  s->pop_size = sc->size;
  s->div_mul = sc->div_mul;
  s->nslots = (uint16_t)nslots;
  s->nwords = (uint8_t)nwords;
  store_rlx(&s->rpending, 0); /* its remote bitmap is empty */
  span_set_cursor(s, 0);
  span_init_bits(s);
  arena_list_add(a, s);
  span_populate(a, s, &pg, npages >= sc->npages[1], &from, &to);
  pagemap_set_range((void *)s->start, npages, s);
  nlock_unlock(&a->heap_lock);
  if (to != 0) os_populate((void *)from, to - from);
  return s;
}

void span_destroy(span_t *s) {
  arena_t *a = arena_get(s->arena);
  span_check(s);
  nalloc_assert(s->used == 0 && s->list != SL_CUR);
  sample_slot_t *ps = atomic_load_explicit(&s->prof, memory_order_relaxed);
  if (ps)
    base_free_purgeable(ps, sizeof(sample_slot_t) * s->nslots *
                      (load_rlx(&s->prof_births) ? 2 : 1));
  atomic_store_explicit(&s->prof, NULL, memory_order_relaxed);
  store_rlx(&s->prof_births, 0);
  store_rlx(&s->prof_live, 0);
  store_rlx(&s->owner_fast, NULL);
  atomic_store_explicit(&s->owner, NULL, memory_order_relaxed);
  if (s->nholes) span_forget_holes(s);
  if (a->broken) return; /* fork child: its page heap may be mid-update */
  pages_t pg = {s->start, s->npages, s->chunk_lo, s->chunk_hi, false};
  nlock_lock(&a->heap_lock);
  if (s->npages > 2) pagemap_set_range((void *)(s->start + PAGE), s->npages - 2, NULL);
  a->nmalloc_small_gone += s->nmalloc;
  arena_list_remove(a, s);
  rec_delete(a, s);
  pheap_free(a, &pg);
  nlock_unlock(&a->heap_lock);
}

/* ---- holes: free pages of a span with live slots ----------------------- */

/* The first run of free slots (free bitmap) at or after slot i:
 * [*lo, *hi). False when there is none. */
static bool span_free_run(span_t *s, uint32_t i, uint32_t *lo, uint32_t *hi) {
  uint32_t w = i / 64;
  if (w >= s->nwords) return false;
  uint64_t m = load_rlx(&s->bits[w]) & (~(uint64_t)0 << (i % 64));
  while (m == 0) {
    if (++w >= s->nwords) return false;
    m = load_rlx(&s->bits[w]);
  }
  *lo = w * 64 + (uint32_t)__builtin_ctzll(m);
  /* bits past the last slot are clear (span_init_bits): the run ends there */
  m = ~load_rlx(&s->bits[w]) & (~(uint64_t)0 << (*lo % 64));
  while (m == 0) {
    if (++w >= s->nwords) break;
    m = ~load_rlx(&s->bits[w]);
  }
  *hi = w >= s->nwords ? s->nslots : w * 64 + (uint32_t)__builtin_ctzll(m);
  if (*hi > s->nslots) *hi = s->nslots;
  return true;
}

/* Purges the whole pages of s on which every slot from slot `from` on is
 * free in the free bitmap (adds them to b, which the caller flushes before
 * a slot of s is handed out again), and counts them as s's holes; returns
 * them. Only the owner may, or whoever has claimed the owner's heap. */
static size_t span_purge_from(span_t *s, uint32_t from, os_batch_t *b) {
  size_t sz = s->slot_size, holes = 0;
  arena_t *a = arena_get(s->arena);
  uint32_t lo, hi;
  for (uint32_t i = from; span_free_run(s, i, &lo, &hi); i = hi) {
    /* the whole pages inside the run; pages past the last slot hold
     * nothing (span_populate may have faulted them in) */
    size_t first = ((size_t)lo * sz + PAGE - 1) / PAGE;
    size_t to = hi == s->nslots ? s->npages : (size_t)hi * sz / PAGE;
    if (to <= first) continue;
    if (os_purge_add(b, (void *)(s->start + first * PAGE), (to - first) * PAGE))
      atomic_fetch_add_explicit(&a->nholes_calls, 1, memory_order_relaxed);
    holes += to - first;
  }
  /* no slot was handed out over the old holes since they were counted
   * (s was never current in between, or its holes were counted out, or
   * no malloc reached them: span_tail_intact): they are among these */
  nalloc_assert(holes >= s->nholes);
  atomic_fetch_add_explicit(&a->npages_holes, holes - s->nholes, memory_order_relaxed);
  atomic_fetch_add_explicit(&a->nholes_purged, holes - s->nholes, memory_order_relaxed);
  s->nholes = (uint16_t)holes;
  return holes;
}

/* span_purge_holes with `used` slots in use (or freed remotely). */
static void span_purge_used(span_t *s, uint32_t used, bool always, os_batch_t *b) {
  nalloc_assert(s->kind == SPAN_SMALL && s->list != SL_CUR);
  size_t nfree = s->nslots - used;
  /* A look costs a pass over the bitmap and a range to purge a run: the
   * next one waits until an eighth of the slots more were freed. */
  if (nfree * s->slot_size < PAGE ||
      (!always && s->holes_used && used + s->nslots / 8u > s->holes_used))
    return;
  s->holes_used = (uint16_t)(used ? used : 1);
  span_purge_from(s, 0, b);
}

/* The position of the k-th (1-based) set bit of m, which has k or more:
 * halves by popcount, six steps whatever k. */
static unsigned bit_select(uint64_t m, unsigned k) {
  unsigned pos = 0;
  for (unsigned w = 32; w != 0; w >>= 1) {
    uint64_t lo = m & ((UINT64_C(1) << w) - 1);
    unsigned c = (unsigned)__builtin_popcountll(lo);
    if (c < k) {
      k -= c;
      m >>= w;
      pos += w;
    } else {
      m = lo;
    }
  }
  return pos;
}

/* The slot after the k-th (k >= 1) free slot of word w, or the end of the
 * word when it has fewer; *n: the free slots counted. */
static uint32_t word_kth_free(const span_t *s, unsigned w, uint32_t k, uint32_t *n) {
  uint64_t m = load_rlx(&s->bits[w]);
  uint32_t c = (uint32_t)__builtin_popcountll(m);
  if (c < k) {
    *n = c;
    return (w + 1) * 64;
  }
  *n = k;
  return w * 64 + bit_select(m, k) + 1;
}

/* Free slots below slot `end`. */
static uint32_t span_free_below(const span_t *s, uint32_t end) {
  uint32_t n = 0;
  unsigned w = 0;
  for (; w < end / 64 && w < s->nwords; w++) n += (uint32_t)__builtin_popcountll(load_rlx(&s->bits[w]));
  if (w < s->nwords && end % 64)
    n += (uint32_t)__builtin_popcountll(load_rlx(&s->bits[w]) & ((UINT64_C(1) << (end % 64)) - 1));
  return n;
}

/* span_purge_tail past its first test, which most sweeps stop at: out of
 * line, so that test pays no prologue (bench-random -t 1: 9,765 calls,
 * 59 past it). */
static NALLOC_NOINLINE bool span_purge_tail_from(span_t *s, uint32_t keep, os_batch_t *b);

bool span_purge_tail(span_t *s, uint32_t keep, os_batch_t *b) {
  nalloc_assert(s->kind == SPAN_SMALL && s->list == SL_CUR && s->nholes == 0 && keep > 0);
  uint32_t nfree = s->nslots + 1u - s->used; /* `used` has the phantom */
  if (nfree <= keep || (size_t)(nfree - keep) * s->slot_size < PAGE) return false;
  return span_purge_tail_from(s, keep, b);
}

static bool span_purge_tail_from(span_t *s, uint32_t keep, os_batch_t *b) {
  /* malloc takes the cursor's word's free slots lowest first, then the
   * lowest word with a free slot: the next `keep` mallocs stay below
   * `from` (span_tail_renew counts how many more may: frees meanwhile
   * only add free slots) */
  unsigned cw = (unsigned)(s->cursor - s->bits);
  uint32_t n, from = word_kth_free(s, cw, keep, &n);
  if (n < keep) { /* the cursor's word, then the lowest free slots */
    uint32_t want = keep - n;
    for (unsigned w = 0; w < s->nwords && want > 0; w++) {
      if (w == cw) continue;
      uint32_t end = word_kth_free(s, w, want, &n);
      want -= n;
      if (n > 0 && end > from) from = end;
    }
  }
  if (from >= s->nslots || (s->nslots - from) * s->slot_size < PAGE) return false;
  if (span_purge_from(s, from, b) == 0) return false;
  s->holes_used = (uint16_t)from;
  span_tail_renew(s);
  return true;
}

void span_tail_renew(span_t *s) {
  nalloc_assert(s->list == SL_CUR && s->nholes > 0);
  /* The mallocs before one takes a slot from `from` on: the cursor's
   * word's free slots below it when that word holds `from`; every free
   * slot below it when the cursor's word lies wholly below (that word
   * first, then the lowest words); none when the cursor is past it. */
  unsigned cw = (unsigned)(s->cursor - s->bits), fw = s->holes_used / 64u;
  uint32_t reach = 0;
  if (cw < fw)
    reach = span_free_below(s, s->holes_used);
  else if (cw == fw)
    reach = (uint32_t)__builtin_popcountll(load_rlx(&s->bits[cw]) &
                                           ((UINT64_C(1) << (s->holes_used % 64)) - 1));
  s->holes_reach = (uint32_t)s->nmalloc + reach;
}

bool span_tail_reached(const span_t *s) {
  nalloc_assert(s->list == SL_CUR && s->nholes > 0);
  uint32_t from = s->holes_used;
  for (unsigned w = from / 64; w < s->nwords; w++) {
    uint64_t used = ~load_rlx(&s->bits[w]);
    if (w == from / 64) used &= ~UINT64_C(0) << (from % 64);
    if (w + 1u == s->nwords && s->nslots % 64) used &= (UINT64_C(1) << (s->nslots % 64)) - 1;
    if (used != 0) return true;
  }
  return false;
}

void span_purge_holes(span_t *s, bool always, os_batch_t *b) {
  span_purge_used(s, s->used, always, b);
}

uint32_t span_count_free(const span_t *s) { return span_free_below(s, s->nslots); }

void span_purge_idle(span_t *s, os_batch_t *b) {
  span_purge_used(s, s->nslots - span_count_free(s), false, b);
}

void span_forget_holes(span_t *s) {
  nalloc_assert(s->nholes > 0);
  arena_t *a = arena_get(s->arena);
  atomic_fetch_sub_explicit(&a->npages_holes, s->nholes, memory_order_relaxed);
  s->nholes = 0;
  s->holes_used = 0;
}

void span_check_debug(span_t *s) {
  nalloc_assert(s->kind == SPAN_SMALL && s->nslots <= SPAN_MAX_SLOTS);
  nalloc_assert(s->nwords == (s->nslots + 63) / 64 && s->cursor >= s->bits && s->cursor < s->bits + s->nwords);
  uint32_t free_slots = 0, pending = 0;
  for (unsigned w = 0; w < s->nwords; w++) {
    uint64_t f = load_rlx(&s->bits[w]), r = load_rlx(&span_rbits(s)[w]);
    nalloc_assert((f & r) == 0); /* a slot is free in one bitmap at most */
    if (w + 1u == s->nwords && s->nslots % 64)
      nalloc_assert(((f | r) >> (s->nslots % 64)) == 0); /* no slot past the end */
    free_slots += (uint32_t)__builtin_popcountll(f);
    pending += (uint32_t)__builtin_popcountll(r);
  }
  (void)free_slots;
  (void)pending;
  nalloc_assert(free_slots + s->used == (uint32_t)s->nslots + (s->list == SL_CUR));
  nalloc_assert(pending <= s->used);
  nalloc_assert(pagemap_get((void *)s->start) == s);
  nalloc_assert(pagemap_get((void *)(span_end(s) - 1)) == s);
}

/* span_collect from word w0 on, the first with remote frees. */
static NALLOC_NOINLINE uint32_t span_collect_from(span_t *s, unsigned w0) {
  _Atomic uint64_t *rb = span_rbits(s);
  uint32_t n = 0;
  for (unsigned w = w0; w < s->nwords; w++) {
    if (load_rlx(&rb[w]) == 0) continue;
    uint64_t r = atomic_exchange_explicit(&rb[w], 0, memory_order_acquire);
    nalloc_assert((load_rlx(&s->bits[w]) & r) == 0);
    store_rlx(&s->bits[w], load_rlx(&s->bits[w]) | r);
    n += (uint32_t)__builtin_popcountll(r);
  }
  nalloc_assert(n <= s->used);
  s->used -= n;
  return n;
}

/* The look for remote frees apart from their collection (which calls
 * popcount, a libgcc call without -mpopcnt, and saves every register): a
 * span that ran dry in a thread that frees its own blocks has none. */
uint32_t span_collect(span_t *s) {
  _Atomic uint64_t *rb = span_rbits(s);
  for (unsigned w = 0; w < s->nwords; w++)
    if (load_rlx(&rb[w]) != 0) return span_collect_from(s, w);
  return 0;
}

/* `used` counts the current span's phantom allocation and the remote
 * frees not yet collected: above nslots, the free bitmap is all zero, and
 * only the remote bitmap is worth a look (a span that ran dry is full, so
 * this skips a scan of up to 16 words on most of them). */
bool span_find(span_t *s) {
  nalloc_assert(s->list == SL_CUR);
  if (s->used <= s->nslots && span_find_local(s)) return true;
  return span_collect(s) && span_find_local(s);
}

static bool span_remote_any(span_t *s) {
  _Atomic uint64_t *rb = span_rbits(s);
  for (unsigned w = 0; w < s->nwords; w++)
    if (atomic_load_explicit(&rb[w], memory_order_seq_cst) != 0) return true;
  return false;
}

/* Waits out a remote free that is pushing s (it holds no lock and runs a
 * handful of instructions; it can only be preempted). */
static void span_wait_push(void) { sched_yield(); }

bool span_want(span_t *s) {
  for (;;) {
    uint8_t st = atomic_load(&s->notify);
    /* WANT: still asked for since the span was last full (span_unwant
     * leaves it), and no remote free has come since (it would have pushed
     * the span); one that comes will. QUEUED: the drain will look at it. */
    if (st == SN_WANT || st == SN_QUEUED) return true;
    if (st == SN_NONE && atomic_compare_exchange_strong(&s->notify, &st, SN_WANT)) break;
    if (st == SN_PUSHING) span_wait_push();
  }
  /* WANT is visible before we look (seq_cst on both sides: a remote free
   * sets its bit, then reads notify): either we see its bit, or it sees
   * WANT and pushes. */
  if (!span_remote_any(s)) return true;
  uint8_t st = SN_WANT;
  if (!atomic_compare_exchange_strong(&s->notify, &st, SN_NONE))
    return true; /* a remote free is announcing it: it will reach the queue */
  span_collect(s);
  return false;
}

bool span_quiet(span_t *s) {
  for (;;) {
    uint8_t st = atomic_load(&s->notify);
    if (st == SN_PUSHING) {
      span_wait_push();
      continue;
    }
    if (st != SN_WANT) return st != SN_QUEUED;
    if (atomic_compare_exchange_strong(&s->notify, &st, SN_NONE)) return true;
  }
}

void span_dequeued(span_t *s) {
  for (;;) {
    uint8_t st = SN_QUEUED;
    if (atomic_compare_exchange_strong(&s->notify, &st, SN_NONE)) return;
    nalloc_assert(st == SN_PUSHING); /* pushed, QUEUED not yet stored */
    span_wait_push();
  }
}

static void span_announce(span_t *s) {
  uint8_t st = SN_WANT;
  if (!atomic_compare_exchange_strong(&s->notify, &st, SN_PUSHING)) return;
  heap_t *h = atomic_load_explicit(&s->owner, memory_order_acquire);
  nalloc_assert(h != NULL);
  heap_queue_push(h, s);
  atomic_store_explicit(&s->notify, SN_QUEUED, memory_order_release);
}

void span_remote_note(span_t *s, int st, unsigned ai) {
  if (st == SN_WANT) span_announce(s);
  else if (st == SN_ORPHAN) arena_note_orphan_free(arena_get(ai));
}

void span_orphan(span_t *s, bool alone) {
  store_rlx(&s->owner_fast, NULL);
  for (;;) {
    uint8_t st = atomic_load(&s->notify);
    if (st == SN_PUSHING && !alone) {
      span_wait_push();
      continue;
    }
    if (atomic_compare_exchange_strong(&s->notify, &st, SN_ORPHAN)) break;
  }
  atomic_store_explicit(&s->owner, NULL, memory_order_release);
}

void span_adopt(span_t *s, heap_t *h) {
  atomic_store_explicit(&s->owner, h, memory_order_release);
  atomic_store(&s->notify, SN_NONE);
  s->list = SL_NONE;
  span_set_fast(s, h->lock == NULL ? h : NULL);
}
