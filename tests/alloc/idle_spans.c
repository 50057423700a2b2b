/* idle_spans.c -- memory a thread freed in classes it then stops using is
 * used again for other sizes (issue 12: CPython's threading tests).
 *
 * A thread allocates and frees short-lived blocks of every size from 4 KiB
 * to 64 KiB (as CPython's compiler and I/O buffers do), then allocates a
 * steady set of 64-byte blocks and keeps them. The truth it checks against
 * is what an allocator whose freed memory serves any size (glibc: freed
 * chunks coalesce back into the free space every size carves) would hold:
 * the resident set grows by the live bytes of the second phase, not by
 * the two phases added up. nalloc keeps an empty span of each class for
 * the class's next block; a span that handed out nothing over a whole sweep
 * interval goes back to the page heap (heap_gc), where the 64-byte spans
 * carve its pages again.
 *
 * Bound: RSS after the second phase - RSS before the first <= live bytes
 * of the second phase (blocks and this test's array of pointers to them)
 * + SLACK_KIB (span records, the second phase's pages faulted before the
 * sweeps gave the first phase's spans back, the 1-3 page spans a sweep
 * keeps). The first phase leaves ~960 KiB resident; without heap_gc they
 * stay on top: +1,088 KiB over the live bytes, +440 with it. mimalloc,
 * jemalloc and tcmalloc come to +104, +360 and +268 (they return most of
 * the first phase's pages before the second). */
#include "check.h"

#define LIVE_BYTES (6u << 20)  /* second phase: 64-byte blocks kept */
#define SMALL 64
#define REPEAT 1               /* transient blocks per size, live at once */
#define SLACK_KIB 768

#define NKEEP ((size_t)LIVE_BYTES / SMALL)
static void *keep[NKEEP];

/* Sizes 4 KiB .. 64 KiB, 1/16 apart: every class of that range. */
/* The compiler may drop a malloc/memset/free whose block nobody reads:
 * every transient block is read back through this. */
static volatile unsigned char sink;

static size_t transient_phase(void) {
  size_t touched = 0;
  for (size_t sz = 4096; sz <= 65536; sz += sz / 16) {
    void *b[REPEAT];
    for (int r = 0; r < REPEAT; r++) {
      b[r] = A_MALLOC(sz);
      CHECK(b[r] != NULL);
      memset(b[r], 0x5a, sz);
      touched += sz;
    }
    for (int r = 0; r < REPEAT; r++) {
      sink = ((volatile unsigned char *)b[r])[sz - 1];
      A_FREE(b[r]);
    }
  }
  return touched;
}

int main(void) {
  bool check_rss = !CHECK_ASAN && !CHECK_TSAN; /* a sanitizer's shadow is resident too */
  /* settle: the first spans of the small class and the page map leaves */
  for (int i = 0; i < 1024; i++) {
    keep[i] = A_MALLOC(SMALL);
    CHECK(keep[i] != NULL);
    memset(keep[i], 1, SMALL);
  }
  long r0 = rss_kib();
  size_t touched = transient_phase();
  long r1 = rss_kib();
  for (size_t i = 1024; i < NKEEP; i++) {
    keep[i] = A_MALLOC(SMALL);
    CHECK(keep[i] != NULL);
    memset(keep[i], (int)(i & 0xff), SMALL);
  }
  long r2 = rss_kib();
  /* the blocks, and keep[]'s pointers to them (this test's own pages) */
  long live_kib = (long)((NKEEP - 1024) * (SMALL + sizeof(void *)) / 1024);
  fprintf(stderr, "idle_spans: %s; transient %zu KiB written (RSS +%ld KiB), then %ld KiB live: "
         "RSS +%ld KiB from the start (bound %ld)\n",
         A_MODE, touched / 1024, r1 - r0, live_kib, r2 - r0, live_kib + SLACK_KIB);
  /* the transient phase must have left something to reuse, or the check
   * below proves nothing */
  if (check_rss) CHECK(r1 - r0 >= SLACK_KIB);
  if (check_rss) CHECK(r2 - r0 <= live_kib + SLACK_KIB);
  for (size_t i = 0; i < NKEEP; i++) {
    CHECK(((unsigned char *)keep[i])[SMALL - 1] == (i < 1024 ? 1u : (unsigned)(i & 0xff)));
    A_FREE(keep[i]);
  }
  return 0;
}
