/* sc_compute.c -- the size-class table and each class's span geometry,
 * computed. It runs at build time (sc_gen.c writes the result into the
 * library as constant tables: no start-up work, no page written) and in
 * the unit test, which checks the built-in tables against it. */
#include "size_class.h"

/* Slots a thread's later spans aim at: enough that a span serves many
 * allocations between slow paths (64 KiB worth), at least a few for the
 * big classes. A class that serves a narrow range of requests (the
 * eighth-of-a-doubling classes to 1 KiB, the header classes) sees fewer of
 * them: until the thread holds SC_BUSY_SPANS spans of it, its later
 * spans aim at 16 KiB, at least 4 slots for a header class, since every
 * class a thread touches keeps a partly used span. With 64 KiB for every
 * class (and splits up to 32 KiB), the finer table raised the peak of
 * bench-larson -t 2 -s 0.1 from 9,204 to 10,516 KiB and of bench-xmix from
 * 20,840 to 25,960 KiB; with 16 KiB, 8,864 and 21,240. A class that keeps
 * the thread busy gets 64 KiB spans again: sqlite3 holding 452 MiB of
 * 4,368-byte blocks in 11-page spans and 179 MiB of 1,032-byte ones in
 * 5-page spans had 9.0 MiB of span records (stats.metadata), not 4.2. */
#define SPAN_TARGET_BYTES ((size_t)64 << 10)
#define SPAN_TARGET_NARROW ((size_t)16 << 10)
#define SPAN_MIN_SLOTS 16
#define SPAN_MIN_SLOTS_HDR 4

/* The class sizes in increasing order (the rule is in types.h): 16-byte
 * steps to 128, then per doubling [2^lg, 2^(lg+1)) from lg = 7 eight
 * classes 2^lg/8 apart, the first of which is split into SC_HDR_SPLIT
 * steps of 2^lg/32 for lg in [SC_HDR_LG_MIN, SC_HDR_LG_END) ("a power of
 * two plus a header": 1,024+8 rounds to 1,056, 4,096+272 to 4,480).
 * hdr[i]: class i is one of those split steps. */
static void sc_sizes(size_t size[SC_NSMALL], bool hdr[SC_NSMALL]) {
  unsigned n = 0;
#define SC_PUT(s, h) (n < SC_NSMALL ? (void)(size[n] = (s), hdr[n++] = (h)) : (void)n++)
  for (size_t s = 16; s <= 128; s += 16) SC_PUT(s, false);
  for (unsigned lg = 7; lg < SC_LG_MAX; lg++) {
    size_t base = (size_t)1 << lg;
    if (lg >= SC_HDR_LG_MIN && lg < SC_HDR_LG_END)
      for (size_t k = 1; k < SC_HDR_SPLIT; k++)
        SC_PUT(base + k * (base / (8 * SC_HDR_SPLIT)), true);
    for (size_t k = 1; k <= 8; k++) SC_PUT(base + k * (base / 8), false);
  }
#undef SC_PUT
  /* SC_NSMALL (types.h) counts the same rule: a mismatch leaves a class
   * of size 0 or drops SC_SMALL_MAX, both of which the unit test reports */
  while (n < SC_NSMALL) size[n] = 0, hdr[n++] = false;
}

/* Unused bytes at the end of a span of np pages of slots of `size`. */
static size_t sc_waste(size_t size, size_t np) {
  size_t bytes = np * PAGE, n = bytes / size;
  if (n > SPAN_MAX_SLOTS) n = SPAN_MAX_SLOTS;
  return bytes - n * size;
}

/* The fewest pages, from `from` on, that hold a slot and waste at most
 * 1/`frac` of the span; among up to a quarter more pages, the one that
 * wastes least. */
static unsigned sc_pages(size_t size, size_t from, size_t frac) {
  size_t np = from;
  while (np * PAGE < size || sc_waste(size, np) * frac > np * PAGE) np++;
  size_t best = np;
  for (size_t k = np + 1; k <= np + np / 4; k++)
    if (sc_waste(size, k) * best * 2 < sc_waste(size, best) * k &&
        k * PAGE / size <= SPAN_MAX_SLOTS && k * PAGE <= SPAN_MAX_BYTES)
      best = k;
  return (unsigned)best;
}

/* Pages of a later span of slots of `size` that aims at `target` bytes,
 * at least `min` slots. */
static unsigned sc_later_pages(size_t size, size_t target, size_t min) {
  size_t want = target / size;
  want = want < min ? min : want > SPAN_MAX_SLOTS ? SPAN_MAX_SLOTS : want;
  return sc_pages(size, (want * size + PAGE - 1) / PAGE, 32);
}

void sc_compute(sc_info_t *info, uint8_t *lookup) {
  size_t sizes[SC_NSMALL];
  bool hdr[SC_NSMALL];
  sc_sizes(sizes, hdr);
  for (unsigned i = 0; i < SC_NSMALL; i++) {
    size_t size = sizes[i];
    if (size == 0) {
      info[i] = (sc_info_t){0};
      continue;
    }
    bool narrow = hdr[i] || (size > 128 && size <= 1024);
    size_t busy = sc_later_pages(size, SPAN_TARGET_BYTES, SPAN_MIN_SLOTS);
    size_t later = narrow ? sc_later_pages(size, SPAN_TARGET_NARROW,
                                           hdr[i] ? SPAN_MIN_SLOTS_HDR : SPAN_MIN_SLOTS)
                          : busy;
    info[i] = (sc_info_t){
        .size = (uint32_t)size,
        .npages = {(uint16_t)sc_pages(size, 1, 8), (uint16_t)later, (uint16_t)busy},
        .div_mul = (((uint64_t)1 << SC_DIV_SHIFT) + size - 1) / size};
  }
  unsigned c = 0;
  for (size_t k = 0; k <= SC_SMALL_MAX / 16; k++) {
    while (c < SC_NSMALL - 1 && info[c].size < k * 16) c++;
    lookup[k] = (uint8_t)c;
  }
}
