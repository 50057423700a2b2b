/* size_class.h -- the table of small size classes.
 *
 * Classes are 16-byte steps up to 128 bytes, then four per doubling (as
 * jemalloc spaces them) up to SC_SMALL_MAX, so the rounding waste stays
 * under 25% and every class is a multiple of 16 (glibc's alignment).
 * Larger requests are page runs (see arena.c). */
#ifndef NALLOC_SIZE_CLASS_H
#define NALLOC_SIZE_CLASS_H

#include "internal.h"

#define SC_NSMALL 44
#define SC_SMALL_MAX ((size_t)65536)
#define SC_MAX_SLOTS 512 /* bitmap bits per span */

typedef struct sc_info_s {
  uint32_t size;    /* slot size in bytes */
  uint32_t npages;  /* pages per span */
  uint32_t nslots;  /* slots per span */
  uint64_t div_mul; /* ceil(2^40 / size): slot index by multiplication */
  uint32_t tcache_max;   /* thread-cache capacity for this class */
} sc_info_t;

extern sc_info_t sc_info[SC_NSMALL];

void sc_boot(void);

/* Class of a request of `size` <= SC_SMALL_MAX bytes. */
static inline unsigned sc_index(size_t size) {
  if (size <= 128) return size ? (unsigned)((size - 1) >> 4) : 0;
  unsigned lg = 63u - (unsigned)__builtin_clzl(size - 1);
  return 8 + ((lg - 7) << 2) +
         (unsigned)((size - 1 - ((size_t)1 << lg)) >> (lg - 2));
}

static inline size_t sc_size(unsigned cls) { return sc_info[cls].size; }

/* Slot index of byte offset `off` in a span of class cls: floor(off /
 * size) by multiplication. Exact for every offset below 2^18 (the largest
 * span): the rounding error, off * (div_mul - 2^40/size) / 2^40 < 2^-22,
 * stays below 1/size >= 2^-16. */
#define SC_DIV_SHIFT 40
static inline uint32_t sc_slot_of(unsigned cls, uintptr_t off) {
  return (uint32_t)((off * sc_info[cls].div_mul) >> SC_DIV_SHIFT);
}

#endif
