/* span_tail.c -- a class whose blocks once filled big spans and that now
 * keeps a few live blocks gives back the free pages of its current span
 * (past the free slots its next mallocs take), and those pages come back
 * intact when the class grows again (issue 12: at the peak of CPython's
 * threading tests 2.5 MiB of free pages sat in current spans, most of it
 * in spans less than a quarter used; bench-realloc's buffers leave the
 * same in every class they grow through).
 *
 * Phase 1 allocates, in each of NCLS sizes from 1 to 16 KiB, blocks for
 * about ten 64 KiB spans, then frees all but the last block of each size:
 * its class's current span then holds one live block over pages that are
 * all resident. Phase 2 allocates and frees page runs only (1 MiB blocks,
 * never written), which count toward the thread's idle sweeps. Truth: the
 * kernel's resident set. An allocator that keeps those pages (nalloc
 * before: RSS unchanged) fails the bound; one that gives back the pages of
 * each current span above the slots its next mallocs may take passes.
 * Phase 3 allocates as many blocks of each size again, over the purged
 * pages, and every block of every phase is checked byte for byte: a purge
 * under a live block, or a slot handed out over a page that lost its
 * contents later, fails here. stats.resident must follow the kernel's
 * count throughout (holes counted out while purged, back in once used).
 * Run with background_thread:false and dirty_decay_ms:-1, so that only the
 * owner's sweeps give pages back. */
#include "check.h"

#define NCLS 24
#define SPAN_BYTES ((size_t)64 << 10)
#define SPANS_EACH 10
#define NTICKS 2000 /* page-run allocations: several sweep intervals */
#define SLACK_KIB 1024 /* stats.resident against statm: metadata */

static size_t size_of(unsigned c) { return 1024 + (size_t)c * (15 * 1024) / (NCLS - 1); }

/* RSS minus what nalloc says is resident. */
static long unaccounted_kib(void) {
  ctl_refresh();
  return rss_kib() - (long)(ctl_size("stats.resident") / 1024);
}

int main(void) {
  bool check_rss = !CHECK_ASAN && !CHECK_TSAN;
  static unsigned char **blk[NCLS];
  static size_t nblk[NCLS];
  long u0 = unaccounted_kib();

  for (unsigned c = 0; c < NCLS; c++) {
    size_t sz = size_of(c), per_span = SPAN_BYTES / sz < 16 ? 16 : SPAN_BYTES / sz;
    nblk[c] = per_span * SPANS_EACH;
    blk[c] = A_MALLOC(nblk[c] * sizeof *blk[c]);
    CHECK(blk[c] != NULL);
    for (size_t i = 0; i < nblk[c]; i++) {
      blk[c][i] = A_MALLOC(sz);
      CHECK(blk[c][i] != NULL);
      fill_fast(blk[c][i], sz, ((uint64_t)c << 32) | i);
    }
  }
  for (unsigned c = 0; c < NCLS; c++)
    for (size_t i = 0; i + 1 < nblk[c]; i++) {
      CHECK(check_fast(blk[c][i], size_of(c), ((uint64_t)c << 32) | i));
      A_FREE(blk[c][i]);
      blk[c][i] = NULL;
    }
  long r1 = rss_kib(), u1 = unaccounted_kib();

  for (unsigned k = 0; k < NTICKS; k++) {
    void *p = A_MALLOC((size_t)1 << 20);
    CHECK(p != NULL);
    A_FREE(p);
  }
  long r2 = rss_kib(), u2 = unaccounted_kib();
  for (unsigned c = 0; c < NCLS; c++) {
    size_t last = nblk[c] - 1;
    CHECKF(check_fast(blk[c][last], size_of(c), ((uint64_t)c << 32) | last),
           "the live block of %zu B lost its contents", size_of(c));
  }
  long bound = r1 - NCLS * 48; /* nalloc: ~100 KiB a size */
  fprintf(stderr,
          "span_tail: %s: %u sizes of 1-16 KiB, one block live each: RSS %ld KiB; after %u "
          "page runs %ld (bound %ld); RSS - stats.resident %ld, %ld, %ld KiB\n",
          A_MODE, NCLS, r1, NTICKS, r2, bound, u0, u1, u2);
  if (check_rss) {
    CHECKF(r2 <= bound, "the current spans' free pages stayed: RSS %ld KiB, bound %ld", r2,
           bound);
    CHECKF(labs(u1 - u0) <= SLACK_KIB && labs(u2 - u0) <= SLACK_KIB,
           "stats.resident is off the kernel's count by %ld / %ld KiB", u1 - u0, u2 - u0);
  }

  /* phase 3: the sizes again, over the purged pages */
  for (unsigned c = 0; c < NCLS; c++)
    for (size_t i = 0; i + 1 < nblk[c]; i++) {
      blk[c][i] = A_MALLOC(size_of(c));
      CHECK(blk[c][i] != NULL);
      fill_fast(blk[c][i], size_of(c), ((uint64_t)(c + NCLS) << 32) | i);
    }
  long u3 = unaccounted_kib();
  if (check_rss)
    CHECKF(labs(u3 - u0) <= SLACK_KIB, "stats.resident is off the kernel's count by %ld KiB",
           u3 - u0);
  for (unsigned c = 0; c < NCLS; c++) {
    for (size_t i = 0; i < nblk[c]; i++) {
      uint64_t tag = ((uint64_t)(i + 1 < nblk[c] ? c + NCLS : c) << 32) | i;
      CHECKF(check_fast(blk[c][i], size_of(c), tag), "block %zu of %zu B lost its contents", i,
             size_of(c));
      A_FREE(blk[c][i]);
    }
    A_FREE(blk[c]);
  }
  return 0;
}
