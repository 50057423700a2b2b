/* size_class.c -- computes the size-class table once at start-up. */
#include "size_class.h"

sc_info_t sc_info[SC_NSMALL];

static size_t sc_class_size(unsigned i) {
  if (i < 8) return (size_t)(i + 1) * 16;
  unsigned lg = 7 + ((i - 8) >> 2), k = (i - 8) & 3;
  return ((size_t)1 << lg) + ((size_t)(k + 1) << (lg - 2));
}

/* Span length: the fewest pages that hold at least 4 slots (so big classes
 * still batch) while wasting at most 1/16 of the span. */
static unsigned sc_span_pages(size_t size) {
  for (unsigned np = 1;; np++) {
    size_t bytes = (size_t)np * PAGE, n = bytes / size;
    if (n > SC_MAX_SLOTS) return np > 1 ? np - 1 : 1;
    if (n >= 4 && (bytes - n * size) * 16 <= bytes) return np;
  }
}

void sc_boot(void) {
  for (unsigned i = 0; i < SC_NSMALL; i++) {
    size_t size = sc_class_size(i);
    unsigned np = sc_span_pages(size);
    size_t n = (size_t)np * PAGE / size;
    if (n > SC_MAX_SLOTS) n = SC_MAX_SLOTS;
    size_t cap = 65536 / size;
    cap = cap < 4 ? 4 : cap > 128 ? 128 : cap;
    sc_info[i] = (sc_info_t){.size = (uint32_t)size,
                             .npages = np,
                             .nslots = (uint32_t)n,
                             .div_mul = (((uint64_t)1 << SC_DIV_SHIFT) + size - 1) / size,
                             .tcache_max = (uint32_t)cap};
  }
}
