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
    /* it still fits, and shrinking keeps more than half of it */
    if (s->kind == SPAN_SMALL && size <= old && size > old / 2) return p;
    if (s->kind == SPAN_LARGE && size > SC_SMALL_MAX && size <= MAX_REQUEST &&
        large_resize(s, size))
      return p;
  }
  /* Growing out of its block: room for a quarter more, so a buffer grown
   * a little at a time moves once per 25% of growth, whatever the class
   * spacing (tcmalloc does the same). */
  size_t room = size > old && size <= SC_SMALL_MAX ? old + old / 4 : size;
  void *q = malloc_room(size, room <= SC_SMALL_MAX ? room : size, caller);
  if (q == NULL) return NULL; /* the old block stays valid */
  memcpy(q, p, old < size ? old : size);
  entry_free(p, FN_REALLOC);
  return q;
}
