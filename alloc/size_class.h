/* size_class.h -- the table of small size classes (spacing in types.h)
 * and the geometry of their spans. Larger requests are page runs
 * (large.c). */
#ifndef NALLOC_SIZE_CLASS_H
#define NALLOC_SIZE_CLASS_H

#include "ctl.h"
#include "types.h"

extern const sc_info_t sc_info[SC_NSMALL];
/* arenas.page, arenas.nbins, arenas.bin.<i>.*: the classes' geometry. */
extern const ctl_table_t sc_ctl_table;
/* Class of each small request, by (size + 15) / 16: one load on the fast
 * path (4 KiB, of which a program touches the few lines it uses). */
extern const uint8_t sc_lookup[SC_SMALL_MAX / 16 + 1];

/* Fills the two tables (sc_compute.c): at build time, and in the unit test
 * that checks the built-in ones. */
void sc_compute(sc_info_t *info, uint8_t *lookup);

/* Class of a request of `size` <= SC_SMALL_MAX bytes. */
static inline unsigned sc_index(size_t size) { return sc_lookup[(size + 15) >> 4]; }

static inline size_t sc_size(unsigned cls) { return sc_info[cls].size; }

/* Pages of the next span of class cls for a heap that holds `nspans`
 * spans of it: with none, the smallest that fits; else one aiming at 16 or
 * 64 KiB (sc_compute.c); with SC_BUSY_SPANS or more, at 64 KiB. */
#define SC_BUSY_SPANS 8
static inline size_t sc_npages(unsigned cls, uint32_t nspans) {
  return sc_info[cls].npages[nspans == 0 ? 0 : nspans < SC_BUSY_SPANS ? 1 : 2];
}

/* Slots of a span of `npages` pages of class cls. */
static inline unsigned sc_nslots(unsigned cls, size_t npages) {
  size_t n = npages * PAGE / sc_info[cls].size;
  return n < SPAN_MAX_SLOTS ? (unsigned)n : SPAN_MAX_SLOTS;
}

/* Slot index of byte offset `off` in a span of class cls: floor(off /
 * size) by multiplication. Exact for every offset below SPAN_MAX_BYTES:
 * the rounding error, off * (div_mul - 2^40/size) / 2^40 < 2^-20, stays
 * below 1/size >= 2^-16. */
static inline uint32_t sc_slot_of(unsigned cls, uintptr_t off) {
  return (uint32_t)((off * sc_info[cls].div_mul) >> SC_DIV_SHIFT);
}

#endif
