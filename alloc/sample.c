/* sample.c -- records of sampled blocks (sample.h): small spans keep an
 * array of sample_slot_t, one per slot, made on the span's first sample
 * (in sampled mode followed by one birth time per slot: prof_births);
 * a large block keeps its own in its record.
 *
 * A span's first sample also turns off its frees' fast path (owner_fast),
 * so that every free of the span looks for a record; the array lives
 * until the span's pages go back. In sampled mode (the spans with births)
 * the span counts its live records (prof_live), and the owner turns the
 * fast path back on when it frees the last one (free.c) or puts the span
 * back on its lists (span_set_fast): at the default rate most spans hold
 * a sample only now and then. */
#include "sample.h"

#include "base.h"
#include "span.h"
#include "../prof/prof_hook.h"

/* Slot i's record in small span s, or NULL while nothing in s was sampled. */
static _Atomic(sample_slot_t) *sample_slot(span_t *s, uint32_t i) {
  sample_slot_t *ps = atomic_load_explicit(&s->prof, memory_order_acquire);
  return ps != NULL ? (_Atomic(sample_slot_t) *)&ps[i] : NULL;
}

static uint32_t slot_of(span_t *s, const void *p) {
  bool ok;
  return span_slot(s, p, &ok);
}

bool sample_record(span_t *s, void *p, void *tctx, size_t size, bool timed) {
  if (s->kind == SPAN_LARGE) {
    s->large_tctx = tctx;
    s->large_size = size;
    s->large_birth = timed ? os_stamp() : 0;
    return true;
  }
  if (timed) return sample_record_timed(s, slot_of(s, p), tctx, size);
  return sample_record_slot(s, slot_of(s, p), tctx, size);
}

/* Births sit after the nslots records. A span whose records were made
 * without them (its first sample was exact, before a prof.reset) keeps
 * its samples untimed: they are left out of the histogram. */
bool sample_record_timed(span_t *s, uint32_t i, void *tctx, size_t size) {
  sample_slot_t *ps = atomic_load_explicit(&s->prof, memory_order_acquire);
  if (ps == NULL) return sample_record_first(s, i, tctx, size, true);
  if (!load_rlx(&s->prof_births)) return sample_record_slot(s, i, tctx, size);
  sample_slot_t c = sample_live_add(s);
  store_rlx((_Atomic(sample_slot_t) *)&ps[s->nslots + i], os_stamp());
  store_rlx((_Atomic(sample_slot_t) *)&ps[i], (uint64_t)size << SAMPLE_SIZE_SHIFT |
                                                  (uintptr_t)tctx | SAMPLE_TIMED | c);
  return true;
}

/* The span's first sample: its records are made, and its frees leave the
 * fast path from now on (they must look for a record). */
bool sample_record_first(span_t *s, uint32_t i, void *tctx, size_t size,
                         bool births) {
  nalloc_assert(s->kind == SPAN_SMALL && size <= SC_SMALL_MAX && i < s->nslots);
  sample_slot_t *ps = NULL;
  size_t bytes = sizeof(sample_slot_t) * s->nslots * (births ? 2 : 1);
  sample_slot_t *fresh = base_alloc_purgeable(bytes);
  if (fresh == NULL) return false;
  /* Both flags before the array is published: a signal handler that
   * samples in this span between the two (a fork child's, or any that
   * mallocs) must find the span's frees off the fast path, its record
   * counted in prof_live and owner_fast tagged (sampled mode: births,
   * sample_record_slot) or owner_fast NULL (exact mode). Set after the
   * array, such a record went in while owner_fast still let the slot's
   * next free take the fast path past it: the one order found that gives
   * the assert in entry_free_slot that alloc_fork_signal_prof's debug
   * build hit once (1 child in 1,000). A handler's sample that comes first
   * publishes its own array, and the exchange below then keeps it. Only
   * the span's allocating thread reads prof_births (sample_record_timed),
   * and span_destroy: a free tells a timed record by its own bit. */
  if (births) store_rlx(&s->prof_births, 1);
  else store_rlx(&s->owner_fast, NULL);
  if (!atomic_compare_exchange_strong(&s->prof, &ps, fresh)) base_free_purgeable(fresh, bytes);
  if (births) /* sample_live_add tags owner_fast */
    return sample_record_timed(s, i, tctx, size);
  /* again: a handler's free before the exchange may have put the fast
   * path back (span_set_fast, which finds no array) */
  store_rlx(&s->owner_fast, NULL);
  return sample_record_slot(s, i, tctx, size);
}

bool sample_release_rec(span_t *s, uint32_t i, const void *p, sample_slot_t v) {
  uint64_t birth = sample_clear_rec(s, i, v);
  prof_sample_free(sample_tctx(v), sample_size(v), p, birth);
  return v & SAMPLE_COUNTED;
}

void sample_release(span_t *s, void *p) {
  if (s->kind != SPAN_LARGE) {
    uint32_t i = slot_of(s, p);
    _Atomic(sample_slot_t) *r = sample_slot(s, i);
    sample_slot_t v = r ? load_rlx(r) : 0;
    if (v != 0) sample_release_rec(s, i, p, v);
    return;
  }
  void *tctx = s->large_tctx;
  if (tctx == NULL) return;
  s->large_tctx = NULL;
  prof_sample_free(tctx, s->large_size, p, s->large_birth);
}

bool sample_taken(span_t *s, const void *p) {
  if (s->kind == SPAN_LARGE) return s->large_tctx != NULL;
  _Atomic(sample_slot_t) *r = sample_slot(s, slot_of(s, p));
  return r != NULL && load_rlx(r) != 0;
}
