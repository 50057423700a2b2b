/* large_reuse.c -- large blocks and footprint (issue 12), measured with
 * the kernel's own figures (VmHWM, VmRSS from /proc/self/status; the peak
 * reset through /proc/self/clear_refs), never nalloc's statistics.
 *
 *   steady    20 live blocks of 5-25 MiB, each written whole, replaced at
 *             random 400 times by blocks of other sizes: the peak resident
 *             memory stays within 1.4x the peak live bytes (1.22x here;
 *             before freed mappings were grown with mremap and runs taken
 *             by best fit, every replacement that fitted no freed run
 *             mapped fresh memory beside them: 1.96x)
 *   realloc   a 256 MiB block, written whole, grown by realloc to 512 MiB
 *             and 1 GiB: the contents stay, and the peak resident memory
 *             does not rise by the old block's size (a copy writes every
 *             old byte again into new pages: the old and the new block are
 *             resident at once)
 *   trim      after everything is freed, malloc_trim(0) gives the pages
 *             back: VmRSS falls back near where it started
 *
 * The RSS bounds are checked in the normal build only: a sanitizer's
 * shadow memory is resident too. */
#include <stdbool.h>

#include "check.h"

static rng_t rng = {42};
static uint64_t rnd(void) { return rng_next(&rng); }

#define NBUF 20
#define MIB ((size_t)1 << 20)

static void run_steady(bool check_rss) {
  unsigned char *b[NBUF];
  size_t sz[NBUF], live = 0, peak_live = 0;
  size_t rss0 = status_kib("VmRSS");
  bool reset = hwm_reset();
  for (int i = 0; i < NBUF; i++) {
    sz[i] = 5 * MIB + rnd() % (20 * MIB);
    b[i] = A_MALLOC(sz[i]);
    CHECK(b[i] != NULL);
    memset(b[i], i + 1, sz[i]);
    live += sz[i];
  }
  peak_live = live;
  for (int r = 0; r < 400; r++) {
    int i = (int)(rnd() % NBUF);
    size_t n = 5 * MIB + rnd() % (20 * MIB);
    unsigned char *p = A_MALLOC(n);
    CHECK(p != NULL);
    memset(p, 0x40 + r % 64, n);
    live += n;
    if (live > peak_live) peak_live = live;
    CHECKF(b[i][0] == b[i][sz[i] - 1] && b[i][sz[i] / 2] == b[i][0],
           "block %d (%zu B) changed while live", i, sz[i]);
    A_FREE(b[i]);
    live -= sz[i];
    b[i] = p;
    sz[i] = n;
  }
  size_t hwm = status_kib("VmHWM");
  for (int i = 0; i < NBUF; i++) A_FREE(b[i]);
  fprintf(stderr, "large_reuse steady: peak live %zu MiB, peak RSS %zu MiB (from %zu MiB)%s\n",
          peak_live / MIB, hwm / 1024, rss0 / 1024, reset ? "" : " (VmHWM not reset)");
  if (check_rss && reset)
    CHECKF((hwm - rss0) * 1024 <= peak_live + peak_live * 2 / 5,
           "peak RSS rose %zu MiB for a peak of %zu MiB live: more than 1.4x",
           (hwm - rss0) / 1024, peak_live / MIB);
}

static void run_realloc(bool check_rss) {
  size_t n = 256 * MIB;
  unsigned char *p = A_MALLOC(n);
  CHECK(p != NULL);
  for (size_t k = 0; k < n; k += 4096) p[k] = (unsigned char)(k >> 12);
  for (size_t grow = 512 * MIB; grow <= 1024 * MIB; grow *= 2) {
    size_t rss = status_kib("VmRSS");
    bool reset = hwm_reset();
    unsigned char *q = A_REALLOC(p, grow);
    CHECK(q != NULL);
    size_t hwm = status_kib("VmHWM");
    for (size_t k = 0; k < n; k += 4096)
      CHECKF(q[k] == (unsigned char)(k >> 12), "realloc to %zu MiB lost byte %zu",
             grow / MIB, k);
    fprintf(stderr, "large_reuse realloc %zu -> %zu MiB: peak RSS +%zu MiB\n", n / MIB,
            grow / MIB, (hwm - rss) / 1024);
    if (check_rss && reset)
      CHECKF((hwm - rss) * 1024 < n / 4,
             "realloc %zu -> %zu MiB raised the peak RSS by %zu MiB: the block was copied",
             n / MIB, grow / MIB, (hwm - rss) / 1024);
    for (size_t k = n; k < grow; k += 4096) q[k] = (unsigned char)(k >> 12);
    p = q;
    n = grow;
  }
  A_FREE(p);
}

int main(void) {
  bool check_rss = !CHECK_ASAN && !CHECK_TSAN; /* a sanitizer's shadow is resident too */
  size_t rss0 = status_kib("VmRSS");
  run_steady(check_rss);
  run_realloc(check_rss);
  A_MALLOC_TRIM(0);
  size_t rss1 = status_kib("VmRSS");
  fprintf(stderr, "large_reuse trim: RSS %zu MiB at start, %zu MiB after malloc_trim(0)\n",
          rss0 / 1024, rss1 / 1024);
  if (check_rss)
    CHECKF(rss1 <= rss0 + 16 * 1024, "malloc_trim(0) left %zu MiB resident (%zu at start)",
           rss1 / 1024, rss0 / 1024);
  printf("large_reuse: ok (%s)\n", A_MODE);
  return 0;
}
