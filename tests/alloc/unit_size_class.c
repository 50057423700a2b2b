/* unit_size_class: the size-class table (alloc/size_class.[ch]), compiled
 * into this test directly.
 * - every request 0..SC_SMALL_MAX maps to the smallest class that holds it;
 *   the mapping is monotone and round-trips (sc_index(sc_size(c)) == c);
 * - classes are multiples of 16 (glibc's alignment), strictly increasing,
 *   and waste at most 25% of the request above 128 bytes;
 * - span geometry is consistent and sc_slot_of (division by
 *   multiplication) is exact for every byte of every slot. */
#include <stdio.h>
#include <stdlib.h>

#include "size_class.h"

#define CHECKF(cond, ...)                                  \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "%s:%d: FAILED: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fputc('\n', stderr);                                 \
      exit(1);                                             \
    }                                                      \
  } while (0)

int main(void) {
  sc_boot();
  for (unsigned c = 0; c < SC_NSMALL; c++) {
    size_t s = sc_size(c);
    CHECKF(s % 16 == 0, "class %u size %zu not a multiple of 16", c, s);
    if (c > 0)
      CHECKF(s > sc_size(c - 1), "class %u size %zu <= class %u size %zu", c,
             s, c - 1, sc_size(c - 1));
    CHECKF(sc_index(s) == c, "sc_index(sc_size(%u) = %zu) = %u", c, s,
           sc_index(s));
    if (c > 0)
      CHECKF(sc_index(sc_size(c - 1) + 1) == c, "sc_index(%zu) = %u, want %u",
             sc_size(c - 1) + 1, sc_index(sc_size(c - 1) + 1), c);
    const sc_info_t *in = &sc_info[c];
    CHECKF(in->size == s, "sc_info[%u].size", c);
    CHECKF(in->npages >= 1, "class %u: %u pages", c, in->npages);
    CHECKF(in->nslots >= 1 && in->nslots <= SC_MAX_SLOTS,
           "class %u: %u slots", c, in->nslots);
    CHECKF((size_t)in->nslots * s <= (size_t)in->npages * PAGE,
           "class %u: %u slots of %zu do not fit in %u pages", c, in->nslots,
           s, in->npages);
    CHECKF(((size_t)in->npages * PAGE - (size_t)in->nslots * s) < s ||
               in->nslots == SC_MAX_SLOTS,
           "class %u: span of %u pages leaves room for another slot", c,
           in->npages);
    CHECKF(in->tcache_max >= 1, "class %u: tcache_max 0", c);
    /* exact slot index for every byte of every slot */
    for (uint32_t k = 0; k < in->nslots; k++) {
      uintptr_t base = (uintptr_t)k * s;
      uintptr_t offs[] = {base, base + 1, base + s / 2, base + s - 1};
      for (int j = 0; j < 4; j++)
        CHECKF(sc_slot_of(c, offs[j]) == k,
               "sc_slot_of(class %u (size %zu), offset %lu) = %u, want %u", c,
               s, (unsigned long)offs[j], sc_slot_of(c, offs[j]), k);
    }
  }
  CHECKF(sc_size(SC_NSMALL - 1) == SC_SMALL_MAX,
         "largest class %zu != SC_SMALL_MAX %zu", sc_size(SC_NSMALL - 1),
         SC_SMALL_MAX);
  CHECKF(sc_index(0) == 0, "sc_index(0) = %u", sc_index(0));

  unsigned prev = 0;
  for (size_t s = 1; s <= SC_SMALL_MAX; s++) {
    unsigned c = sc_index(s);
    CHECKF(c < SC_NSMALL, "sc_index(%zu) = %u out of range", s, c);
    CHECKF(c >= prev, "sc_index not monotone at %zu (%u after %u)", s, c,
           prev);
    prev = c;
    size_t cs = sc_size(c);
    CHECKF(cs >= s, "sc_index(%zu) gives class %u of size %zu", s, c, cs);
    if (c > 0)
      CHECKF(sc_size(c - 1) < s, "request %zu fits the smaller class %u (%zu)",
             s, c - 1, sc_size(c - 1));
    if (s > 128)
      CHECKF((cs - s) * 4 <= s,
             "request %zu rounds to %zu: waste %.1f%% > 25%%", s, cs,
             100.0 * (double)(cs - s) / (double)s);
    else
      CHECKF(cs - s < 16, "request %zu rounds to %zu (16-byte steps)", s, cs);
  }
  printf("unit_size_class: ok (%d classes, largest %zu)\n", SC_NSMALL,
         SC_SMALL_MAX);
  return 0;
}
