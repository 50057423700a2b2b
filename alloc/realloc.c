/* realloc.c -- realloc: in place when the new size keeps the block's
 * class or its pages can grow or shrink, else a new block and a copy. */
#include <errno.h>
#include <string.h>

#include "entry.h"
#include "large.h"
#include "sample.h"


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
  /* A sampled object always moves, so the profile charges the new size
   * to the realloc caller's stack. */
  if (!sample_taken(s, p)) {
    if (s->kind == SPAN_SMALL && size <= SC_SMALL_MAX && sc_index(size) == s->cls)
      return p;
    if (s->kind == SPAN_LARGE && size > SC_SMALL_MAX && size <= MAX_REQUEST &&
        large_resize(s, size))
      return p;
  }
  void *q = malloc_slow(size, 0, false, caller, NULL);
  if (q == NULL) return NULL; /* the old block stays valid */
  memcpy(q, p, old < size ? old : size);
  entry_free(p, FN_REALLOC);
  return q;
}
