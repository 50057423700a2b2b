/* span_holes.c -- pages that hold no live block inside spans that still
 * hold some are given back once their class stops allocating, and come
 * back intact when it starts again (issue 12: bench-frag's second phase).
 *
 * Phase 1 allocates blocks of 16 B-1 KiB (every class of that range),
 * phase 2 frees 9 of every 10 in allocation order, so the survivors are
 * spread over every span; phase 3 allocates half the freed volume again
 * in 1-4 KiB blocks, which the holes' classes cannot serve. The truth is
 * what an allocator whose freed memory serves any size would hold (glibc
 * coalesces the freed chunks and carves the new blocks from them): RSS
 * after phase 3 no higher than after phase 1. A size-class allocator that
 * keeps the freed slots' pages adds phase 3 on top (nalloc before:
 * +100% of phase 3's bytes; jemalloc, tcmalloc and mimalloc on bench-frag
 * likewise). Bound: phase 3 adds at most a quarter of its bytes, and its
 * peak (VmHWM, reset before it) at most 1/32 of them: the free pages must
 * be found while phase 3 begins, not after it has faulted new spans in
 * (nalloc before its looks between sweeps counted a class idle since the
 * previous look: a peak 7.4 MiB above phase 1 for 43 MiB of blocks, 17%,
 * while RSS at the end was below phase 1's).
 *
 * Then phase 4 allocates the old sizes again (their spans' purged pages
 * fault back in), and every block of every phase is checked byte for
 * byte: a purge that took a page with a live byte on it, or a slot handed
 * out over a page that lost its contents afterwards, fails here. Along
 * the way stats.resident must follow the kernel's count (the holes are
 * counted out of `active` while purged, and back in once used). Run with
 * malloc_trim(0) too: it purges every hole of the calling thread's spans
 * at once. */
#include <sys/mman.h>

#include "check.h"

#define PHASE1_BYTES ((size_t)96 << 20)
#define NMAX (PHASE1_BYTES / 16)
#define SLACK_KIB 2048 /* stats.resident against statm: metadata, span
                          pages never written */

typedef struct {
  unsigned char *p;
  uint32_t n;
} blk_t;

static blk_t *small_blk, *big_blk;
static size_t nsmall, nbig;

static void fill(blk_t *b, uint64_t tag) { fill_fast(b->p, b->n, tag); }
static void check_blk(const blk_t *b, uint64_t tag, const char *what) {
  CHECKF(check_fast(b->p, b->n, tag), "%s block %llu (%u B at %p) lost its contents", what,
         (unsigned long long)tag, b->n, (void *)b->p);
}

/* RSS minus what nalloc says is resident, minus the pages of this test's
 * arrays written so far: the program's own pages (code, stack), which
 * must not move much while only nalloc's pages come and go. */
static long unaccounted_kib(void) {
  ctl_refresh();
  long arrays = (long)((nsmall * sizeof *small_blk + nbig * sizeof *big_blk) / 1024);
  return rss_kib() - (long)(ctl_size("stats.resident") / 1024) - arrays;
}

static size_t alloc_range(blk_t *out, size_t max, size_t bytes, size_t lo, size_t hi,
                          rng_t *r, uint64_t tag0) {
  size_t n = 0, got = 0;
  while (got < bytes && n < max) {
    size_t sz = (size_t)rng_range(r, lo, hi);
    out[n].p = A_MALLOC(sz);
    CHECK(out[n].p != NULL);
    out[n].n = (uint32_t)sz;
    fill(&out[n], tag0 + n);
    got += sz;
    n++;
  }
  return n;
}

int main(int argc, char **argv) {
  bool trim = argc > 1 && strcmp(argv[1], "trim") == 0;
  bool check_rss = !CHECK_ASAN && !CHECK_TSAN;
  rng_t r;
  rng_seed(&r, 12);
  small_blk = mmap(NULL, NMAX * sizeof *small_blk, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  big_blk = mmap(NULL, NMAX / 64 * sizeof *big_blk, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(small_blk != MAP_FAILED && big_blk != MAP_FAILED);
  long u0 = unaccounted_kib();

  nsmall = alloc_range(small_blk, NMAX, PHASE1_BYTES, 16, 1024, &r, 0);
  long r1 = rss_kib(), u1 = unaccounted_kib();
  size_t freed = 0;
  for (size_t i = 0; i < nsmall; i++)
    if (i % 10) {
      check_blk(&small_blk[i], i, "phase 1");
      freed += small_blk[i].n;
      A_FREE(small_blk[i].p);
      small_blk[i].p = NULL;
    }
  if (trim) A_MALLOC_TRIM(0);
  long r2 = rss_kib();
  bool hwm = hwm_reset();
  nbig = alloc_range(big_blk, NMAX / 64, freed / 2, 1024, 4096, &r, 1ull << 40);
  long r3 = rss_kib(), u3 = unaccounted_kib();
  long peak3 = hwm ? (long)status_kib("VmHWM") : r3;
  long phase3_kib = (long)(freed / 2 / 1024);
  fprintf(stderr,
          "span_holes: %s%s: phase 1 %zu blocks, RSS %ld KiB; freed %zu KiB: RSS %ld; phase 3 "
          "%ld KiB: RSS %ld (bound %ld), peak %ld (bound %ld); RSS - stats.resident %ld, %ld, "
          "%ld KiB\n",
          A_MODE, trim ? ", malloc_trim(0)" : "", nsmall, r1, freed / 1024, r2, phase3_kib, r3,
          r1 + phase3_kib / 4, peak3, r1 + phase3_kib / 32, u0, u1, u3);
  if (check_rss) {
    CHECKF(r3 <= r1 + phase3_kib / 4, "phase 3 grew RSS by %ld KiB for %ld KiB of blocks",
           r3 - r1, phase3_kib);
    CHECKF(peak3 <= r1 + phase3_kib / 32,
           "phase 3 peaked %ld KiB above phase 1 for %ld KiB of blocks", peak3 - r1, phase3_kib);
    CHECKF(labs(u3 - u0) <= SLACK_KIB && labs(u1 - u0) <= SLACK_KIB,
           "stats.resident is off the kernel's count by %ld / %ld KiB", u1 - u0, u3 - u0);
    if (trim) CHECKF(r2 <= r1 - (long)(freed / 1024) / 4, "malloc_trim(0) left RSS at %ld", r2);
  }

  /* phase 4: the freed sizes again, into the spans with holes */
  for (size_t i = 0; i < nsmall; i++)
    if (i % 10) {
      small_blk[i].p = A_MALLOC(small_blk[i].n);
      CHECK(small_blk[i].p != NULL);
      fill(&small_blk[i], i + (1ull << 41));
    }
  long u4 = unaccounted_kib();
  if (check_rss)
    CHECKF(labs(u4 - u0) <= SLACK_KIB, "stats.resident is off the kernel's count by %ld KiB",
           u4 - u0);
  for (size_t i = 0; i < nsmall; i++) {
    check_blk(&small_blk[i], i % 10 ? i + (1ull << 41) : i, i % 10 ? "phase 4" : "surviving");
    A_FREE(small_blk[i].p);
  }
  for (size_t i = 0; i < nbig; i++) {
    check_blk(&big_blk[i], (1ull << 40) + i, "phase 3");
    A_FREE(big_blk[i].p);
  }
  return 0;
}
