/* tcache.c -- thread-cache creation, refill, flush and idle trimming. */
#include "tcache.h"

#include <string.h>

#include "arena.h"
#include "conf.h"

tcache_t tcache_empty;

/* Every TCACHE_GC_TICKS slow-path events, classes that saw no refill or
 * flush since the last look are idle: give back three quarters of what
 * they hold, so a thread that stopped using a size does not sit on it. */
#define TCACHE_GC_TICKS 1024

static size_t tcache_size(uint32_t *caps) {
  size_t n = 0;
  for (unsigned c = 0; c < SC_NSMALL; c++) {
    caps[c] = opt_tcache && sc_info[c].size <= opt_tcache_max ? sc_info[c].tcache_max : 0;
    n += caps[c] + 1; /* + the dummy slots[-1] */
  }
  /* a whole number of cache lines, so base_alloc aligns it: a thread's
   * cache shares no line with another thread's data */
  return ALIGN_UP(sizeof(tcache_t) + n * sizeof(void *), CACHELINE);
}

tcache_t *tcache_create(void) {
  uint32_t caps[SC_NSMALL];
  tcache_t *tc = base_alloc(tcache_size(caps));
  if (tc == NULL) return NULL;
  void **slots = (void **)(tc + 1);
  for (unsigned c = 0; c < SC_NSMALL; c++) {
    tc->bins[c].slots = slots + 1;
    tc->bins[c].max = caps[c];
    slots += caps[c] + 1;
  }
  return tc;
}

void tcache_destroy(tcache_t *tc) {
  if (tc == NULL || tc == &tcache_empty) return;
  uint32_t caps[SC_NSMALL];
  tcache_flush_all(tc);
  base_free(tc, tcache_size(caps));
}

void tcache_flush_bin(tcache_t *tc, unsigned cls, uint32_t keep) {
  tbin_t *b = &tc->bins[cls];
  if (b->count <= keep) return;
  uint32_t n = b->count - keep;
  arena_flush(b->slots, n);
  memmove(b->slots, b->slots + n, keep * sizeof(void *));
  b->count = keep;
  tc->busy[cls] = 1;
}

void tcache_flush_all(tcache_t *tc) {
  for (unsigned c = 0; c < SC_NSMALL; c++) tcache_flush_bin(tc, c, 0);
}

static void tcache_gc(tcache_t *tc) {
  for (unsigned c = 0; c < SC_NSMALL; c++) {
    if (!tc->busy[c] && tc->bins[c].count > 0)
      tcache_flush_bin(tc, c, tc->bins[c].count / 4);
    tc->busy[c] = 0;
  }
}

void *tcache_refill(tsd_t *tsd, tcache_t *tc, unsigned cls) {
  if (++tc->ticks >= TCACHE_GC_TICKS) {
    tc->ticks = 0;
    tcache_gc(tc);
  }
  tbin_t *b = &tc->bins[cls];
  arena_t *a = arena_get(tsd->arena);
  if (a == NULL) return NULL;
  uint32_t want = b->max / 2 ? b->max / 2 : 1;
  b->count = arena_refill(a, cls, b->slots, want);
  tc->busy[cls] = 1;
  return b->count ? b->slots[--b->count] : NULL;
}
