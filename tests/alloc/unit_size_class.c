/* unit_size_class: the size-class table (alloc/size_class.[ch], generated
 * from alloc/sc_compute.c), compiled into this test directly.
 * - every request 0..SC_SMALL_MAX maps to the smallest class that holds it;
 *   the mapping is monotone and round-trips (sc_index(sc_size(c)) == c);
 * - classes are multiples of 16 (glibc's alignment), strictly increasing,
 *   and waste under 16 bytes up to 128, at most 12.5% of the request above,
 *   and less than 1/32 of 2^k for a request of 2^k (512 B to 4 KiB) plus
 *   up to 2^k/8 (a power of two and a header, types.h);
 * - span geometry is consistent and sc_slot_of (division by
 *   multiplication) is exact for every byte of every slot;
 * - span_slot_word (free's check of a pointer: a slot start, below nslots,
 *   by one multiplication and one compare) agrees with division for every
 *   byte offset of every span size of every class, and of a span of 2^20
 *   bytes; a record of another kind (div_mul 0, no slots) takes nothing. */
#include <stdio.h>
#include <stdlib.h>

#include "size_class.h"
#include "span.h"

#include "../check_core.h"

/* The tables built into the library (generated at build time) are what
 * sc_compute gives now: a stale generated file shows here. */
static void check_generated(void) {
  static sc_info_t info[SC_NSMALL];
  static uint8_t lookup[SC_SMALL_MAX / 16 + 1];
  sc_compute(info, lookup);
  for (unsigned c = 0; c < SC_NSMALL; c++)
    CHECKF(info[c].size == sc_info[c].size && info[c].npages[0] == sc_info[c].npages[0] &&
               info[c].npages[1] == sc_info[c].npages[1] &&
               info[c].npages[2] == sc_info[c].npages[2] && info[c].div_mul == sc_info[c].div_mul,
           "class %u: built-in table differs from sc_compute", c);
  for (size_t k = 0; k <= SC_SMALL_MAX / 16; k++)
    CHECKF(lookup[k] == sc_lookup[k], "sc_lookup[%zu]: built-in %u, computed %u", k,
           sc_lookup[k], lookup[k]);
}

/* span_slot_word for every offset of a span of `bytes` bytes of class c
 * against the truth: p starts a slot exactly when off % size is 0 and
 * off / size < nslots, and then the index and its bitmap word follow. */
static void check_span_slot(unsigned c, size_t bytes, unsigned nslots) {
  static span_t s; /* no bitmaps needed: only the header is read */
  size_t size = sc_size(c);
  s.start = (uintptr_t)1 << 32;
  s.div_mul = sc_info[c].div_mul;
  s.nslots = (uint16_t)nslots;
  for (size_t off = 0; off < bytes; off++) {
    bool ok;
    uintptr_t w, i = span_slot_word(&s, (void *)(s.start + off), &ok, &w);
    bool want = off % size == 0 && off / size < nslots;
    if (ok != want || (ok && (i != off / size || w != i >> 6)))
      CHECKF(0, "class %u (size %zu, %u slots in %zu bytes), offset %zu: ok %d index %lu "
             "word %lu, want ok %d index %zu", c, size, nslots, bytes, off, ok,
             (unsigned long)i, (unsigned long)w, want, off / size);
  }
}

int main(void) {
  check_generated();
  for (unsigned c = 0; c < SC_NSMALL; c++) {
    for (int k = 0; k < 3; k++)
      if (k == 0 || sc_info[c].npages[k] != sc_info[c].npages[k - 1])
        check_span_slot(c, sc_info[c].npages[k] * PAGE, sc_nslots(c, sc_info[c].npages[k]));
    /* the longest span there can be, and its slots up to the cap */
    check_span_slot(c, SPAN_MAX_BYTES, sc_nslots(c, SPAN_MAX_BYTES / PAGE));
  }
  {
    static span_t other; /* a large or free record: div_mul and nslots 0 */
    other.start = (uintptr_t)1 << 32;
    for (size_t off = 0; off < SPAN_MAX_BYTES; off += 4093) {
      bool ok;
      uintptr_t w;
      span_slot_word(&other, (void *)(other.start + off), &ok, &w);
      CHECKF(!ok, "a record with no slots took offset %zu", off);
    }
  }
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
    for (int k = 0; k < 3; k++) {
      size_t np = in->npages[k], n = sc_nslots(c, np);
      CHECKF(np >= 1, "class %u: span %d has %zu pages", c, k, np);
      CHECKF(n >= 1 && n <= SPAN_MAX_SLOTS, "class %u: span %d has %zu slots", c, k, n);
      CHECKF(n * s <= np * PAGE, "class %u: %zu slots of %zu do not fit in %zu pages",
             c, n, s, np);
      CHECKF(np * PAGE <= SPAN_MAX_BYTES, "class %u: span %d of %zu pages is too long",
             c, k, np);
      /* waste: at most 1/8 of the first span, 1/32 of the later ones, or
       * the slot count is capped */
      size_t waste = np * PAGE - n * s;
      CHECKF(waste * (k ? 32 : 8) <= np * PAGE || n == SPAN_MAX_SLOTS,
             "class %u (size %zu): span %d of %zu pages wastes %zu bytes", c, s, k,
             np, waste);
    }
    CHECKF(in->npages[0] <= in->npages[1] && in->npages[1] <= in->npages[2],
           "class %u: spans %u, %u, %u pages: not growing", c, in->npages[0], in->npages[1],
           in->npages[2]);
    CHECKF(sc_npages(c, 0) == in->npages[0] && sc_npages(c, 1) == in->npages[1] &&
               sc_npages(c, SC_BUSY_SPANS) == in->npages[2],
           "class %u: sc_npages", c);
    CHECKF(sc_nslots(c, in->npages[1]) >= 4 || sc_nslots(c, in->npages[1]) * s >= 65536,
           "class %u: later spans hold only %u slots", c, sc_nslots(c, in->npages[1]));
    /* exact slot index for every byte of every slot */
    for (uint32_t k = 0; (size_t)(k + 1) * s <= SPAN_MAX_BYTES; k++) {
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
    size_t pow2 = (size_t)1 << (63 - __builtin_clzll((s - 1) | 1));
    if (s > 128) /* eight classes per doubling above 128 B */
      CHECKF((cs - s) * 8 <= s,
             "request %zu rounds to %zu: waste %.1f%% > 12.5%%", s, cs,
             100.0 * (double)(cs - s) / (double)s);
    else
      CHECKF(cs - s < 16, "request %zu rounds to %zu (16-byte steps)", s, cs);
    if (s > pow2 && pow2 >= ((size_t)1 << SC_HDR_LG_MIN) &&
        pow2 < ((size_t)1 << SC_HDR_LG_END) && (s - pow2) * 8 <= pow2)
      CHECKF((cs - s) * 32 < pow2, "request %zu (%zu + %zu) rounds to %zu: %zu > 1/32 of %zu",
             s, pow2, s - pow2, cs, cs - s, pow2);
  }
  printf("unit_size_class: ok (%d classes, largest %zu)\n", SC_NSMALL,
         SC_SMALL_MAX);
  return 0;
}
