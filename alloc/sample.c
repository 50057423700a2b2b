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

static inline sample_slot_t sample_pack(void *tctx, size_t size) {
  return (uint64_t)size << SAMPLE_SIZE_SHIFT | (uintptr_t)tctx;
}
static inline void *sample_tctx(sample_slot_t r) {
  return (void *)(uintptr_t)(r & (((uint64_t)1 << SAMPLE_SIZE_SHIFT) - 1));
}
static inline size_t sample_size(sample_slot_t r) {
  return (size_t)(r >> SAMPLE_SIZE_SHIFT);
}

/* p's record in small span s, or NULL while nothing in s was sampled. */
static _Atomic(sample_slot_t) *sample_slot(span_t *s, const void *p) {
  sample_slot_t *ps = atomic_load_explicit(&s->prof, memory_order_acquire);
  bool ok;
  return ps != NULL ? (_Atomic(sample_slot_t) *)&ps[span_slot(s, p, &ok)] : NULL;
}

bool sample_record(span_t *s, void *p, void *tctx, size_t size) {
  if (s->kind == SPAN_LARGE) {
    s->large_tctx = tctx;
    s->large_size = size;
    return true;
  }
  nalloc_assert(s->kind == SPAN_SMALL && size <= SC_SMALL_MAX);
  sample_slot_t *ps = atomic_load_explicit(&s->prof, memory_order_acquire);
  if (ps == NULL) {
    size_t bytes = sizeof(sample_slot_t) * s->nslots;
    sample_slot_t *fresh = base_alloc(bytes);
    if (fresh == NULL) return false;
    if (atomic_compare_exchange_strong(&s->prof, &ps, fresh)) ps = fresh;
    else base_free(fresh, bytes);
    /* frees in this span now look for samples */
    store_rlx(&s->owner_fast, NULL);
  }
  store_rlx(sample_slot(s, p), sample_pack(tctx, size));
  return true;
}

void sample_release(span_t *s, void *p) {
  void *tctx;
  size_t size;
  if (s->kind == SPAN_LARGE) {
    if ((tctx = s->large_tctx) == NULL) return;
    size = s->large_size;
    s->large_tctx = NULL;
  } else {
    _Atomic(sample_slot_t) *r = sample_slot(s, p);
    sample_slot_t v = r ? load_rlx(r) : 0;
    if (v == 0) return;
    store_rlx(r, 0);
    tctx = sample_tctx(v);
    size = sample_size(v);
  }
  prof_sample_free(tctx, size);
}

bool sample_taken(span_t *s, const void *p) {
  if (s->kind == SPAN_LARGE) return s->large_tctx != NULL;
  _Atomic(sample_slot_t) *r = sample_slot(s, p);
  return r != NULL && load_rlx(r) != 0;
}
