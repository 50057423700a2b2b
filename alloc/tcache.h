/* tcache.h -- thread caches: per thread, per size class, a stack of free
 * slots. malloc pops and free pushes with no lock and no atomic operation;
 * refill and flush move batches to and from the arena bins. */
#ifndef NALLOC_TCACHE_H
#define NALLOC_TCACHE_H

#include "size_class.h"

typedef struct tbin_s {
  void **slots;   /* slots[0] is the oldest entry; slots[-1] is a NULL dummy */
  uint32_t count; /* entries in slots */
  uint32_t max;   /* capacity; 0 = this class is not cached */
} tbin_t;

typedef struct tcache_s {
  tbin_t bins[SC_NSMALL];
  uint32_t ticks;             /* slow-path events since the last GC */
  uint8_t busy[SC_NSMALL];    /* refilled or flushed since the last GC */
} tcache_t;

/* The cache of a thread that has none (not yet set up, tcache:false, or
 * exiting): every bin has max 0, so the fast paths always miss. Never
 * written. */
extern tcache_t tcache_empty;

tcache_t *tcache_create(void);
void tcache_destroy(tcache_t *tc);
/* Refills bin cls from the thread's arena and returns one object (NULL
 * when the OS refuses memory). */
void *tcache_refill(tsd_t *tsd, tcache_t *tc, unsigned cls);
/* Flushes the oldest entries of bin cls until `keep` remain. */
void tcache_flush_bin(tcache_t *tc, unsigned cls, uint32_t keep);
void tcache_flush_all(tcache_t *tc);

#endif
