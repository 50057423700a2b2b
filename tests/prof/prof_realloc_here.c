/* prof_realloc_here.c -- a sampled realloc that fits where the block is
 * leaves the block there and moves its record to the new object
 * (alloc/realloc.c, realloc_sampled); before, a sampled realloc always
 * moved the block (into a page run of its own), which cost bench-realloc
 * a copy of up to 64 KiB a sample.
 *
 * K buffers of 1024 bytes (a size class) from grow_start, each then
 * realloc'ed M times to 513-1024 bytes from grow_loop, the last time to
 * 1000. Checked against truth: no realloc moves a block (every one fits
 * its room, sampled or not);
 * grow_start holds nothing in use (each
 * realloc's old object is gone, its record too); grow_loop holds exactly
 * K objects and K * 1000 bytes in exact mode (argument `exact`), and in
 * sampled mode (`sampled`) the reader's unbiased in-use estimate is within
 * 6 standard deviations of them. */
#include "prof_check.h"

#include <malloc.h>

#define K 20000
#define M 50
#define LAST 1000

#ifdef NALLOC_TEST_PREFIXED
#define t_usable nalloc_malloc_usable_size
#else
#define t_usable malloc_usable_size
#endif

static void *blk[K];
static unsigned moved;

NOINL void grow_start(void) {
  for (unsigned b = 0; b < K; b++) CHECK((blk[b] = t_malloc(1024)) != NULL);
  __asm__ volatile("" ::: "memory");
}

NOINL void grow_loop(void) {
  for (unsigned m = 0; m < M; m++)
    for (unsigned b = 0; b < K; b++) {
      size_t z = m + 1 == M ? LAST : 513 + (b * 7 + m * 13) % 512;
      /* A block fits when it keeps more than half of its room: every one
       * but those on a page run of their own (a malloc sampled at lg 16
       * and above, 4 KiB) and, once moved from there, in a smaller class. */
      size_t room = t_usable(blk[b]);
      bool fits = z <= room && z > room / 2;
      void *q = t_realloc(blk[b], z);
      CHECK(q != NULL);
      if (fits) CHECK(q == blk[b]); /* it stays, sampled or not */
      else moved++;
      blk[b] = q;
    }
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
  bool exact = argc > 1 && strcmp(argv[1], "exact") == 0;
  grow_start();
  grow_loop();
  pc_prof_t P = pc_dump_load("prof_realloc_here");
  pc_sum_t st = pc_sum(&P, "grow_start", "main");
  pc_sum_t s = pc_sum(&P, "grow_loop", "main");
  printf("%u reallocs that did not fit\n", moved);
  printf("grow_start in use %" PRIu64 " objects %" PRIu64 " bytes; grow_loop "
         "%" PRIu64 " %" PRIu64 " (rate %" PRIu64 ")\n",
         st.n, st.b, s.n, s.b, P.rate);
  CHECK_EQ_U(st.n, 0);
  CHECK_EQ_U(st.b, 0);
  if (exact) {
    CHECK_EQ_U(P.rate, 1);
    CHECK_EQ_U(s.n, K);
    CHECK_EQ_U(s.b, (uint64_t)K * LAST);
  } else {
    double R = (double)P.rate, p = -expm1(-(double)LAST / R);
    double vo = K * (1 - p) / p, est_n = 0, est_b = 0;
    for (int i = 0; i < P.nrec; i++) {
      const pc_rec_t *r = &P.rec[i];
      if (r->kind != PC_MAIN || strcmp(pc_fn(r->f[0]), "grow_loop") || r->n == 0)
        continue;
      double sc = 1 / -expm1(-((double)r->b / (double)r->n) / R);
      est_n += (double)r->n * sc;
      est_b += (double)r->b * sc;
    }
    printf("sampled: in use %.0f objects, %.0f bytes; truth %d, %d; 6 sd %.0f\n",
           est_n, est_b, K, K * LAST, 6 * sqrt(vo));
    CHECK(fabs(est_n - K) <= 6 * sqrt(vo));
    CHECK(fabs(est_b - (double)K * LAST) <= 6 * sqrt(vo) * LAST);
  }
  pc_free(&P);
  for (unsigned b = 0; b < K; b++) t_free(blk[b]);
  printf("prof_realloc_here: ok\n");
  return 0;
}
