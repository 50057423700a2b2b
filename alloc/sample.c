/* sample.c -- records of sampled blocks (sample.h): small spans keep an
 * array of sample_slot_t, one per slot, made on the span's first sample;
 * a large block keeps its own in its record.
 *
 * A span's first sample also turns off its frees' fast path (owner_fast),
 * so that every free of the span looks for a record; the array lives
 * until the span's pages go back. */
#include "sample.h"

#include "base.h"
#include "span.h"
#include "../prof/prof_hook.h"

static inline void *sample_tctx(sample_slot_t r) {
  return (void *)(uintptr_t)(r & (((uint64_t)1 << SAMPLE_SIZE_SHIFT) - 1));
}
static inline size_t sample_size(sample_slot_t r) {
  return (size_t)(r >> SAMPLE_SIZE_SHIFT);
}

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
    s->large_birth = timed ? nalloc_now_ns() : 0;
    return true;
  }
  return sample_record_slot(s, slot_of(s, p), tctx, size);
}

/* The span's first sample: its records are made, and its frees leave the
 * fast path from now on (they must look for a record). */
bool sample_record_first(span_t *s, uint32_t i, void *tctx, size_t size) {
  nalloc_assert(s->kind == SPAN_SMALL && size <= SC_SMALL_MAX && i < s->nslots);
  sample_slot_t *ps = NULL;
  size_t bytes = sizeof(sample_slot_t) * s->nslots;
  sample_slot_t *fresh = base_alloc(bytes);
  if (fresh == NULL) return false;
  if (!atomic_compare_exchange_strong(&s->prof, &ps, fresh)) base_free(fresh, bytes);
  store_rlx(&s->owner_fast, NULL);
  return sample_record_slot(s, i, tctx, size);
}

void sample_release_slot(span_t *s, uint32_t i, const void *p) {
  _Atomic(sample_slot_t) *r = sample_slot(s, i);
  sample_slot_t v = r ? load_rlx(r) : 0;
  if (v == 0) return;
  store_rlx(r, 0);
  prof_sample_free(sample_tctx(v), sample_size(v), p, 0);
}

void sample_release(span_t *s, void *p) {
  if (s->kind != SPAN_LARGE) {
    sample_release_slot(s, slot_of(s, p), p);
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
