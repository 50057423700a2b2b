/* prof_realloc_grow.c -- a realloc is an allocation of its new size for
 * the sampling countdown, whether or not the block moves (issue 13 item
 * 2). 10^6 reallocs of one block among 33-48 bytes (one size class: the
 * block never needs to move), from one call site. The realloc stack must
 * count them all: exactly in exact mode (argument `exact`), and in sampled
 * mode (`sampled`, lg_prof_sample:14) within 6 standard deviations of 10^6
 * allocations and of their bytes. Before the fix the sampled profile had
 * no such stack at all: a block that stays in place was never charged. */
#include "prof_check.h"

#define N 1000000
#define LO 33
#define SPAN 16

static void *blk;

NOINL void grow_start(void) {
  blk = t_malloc(LO);
  __asm__ volatile("" ::: "memory");
}

NOINL void grow_loop(void) {
  for (unsigned i = 0; i < N; i++) {
    blk = t_realloc(blk, LO + (i * 7 + 3) % SPAN);
    CHECK(blk);
  }
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
  bool exact = argc > 1 && strcmp(argv[1], "exact") == 0;
  grow_start();
  grow_loop();
  pc_prof_t P = pc_dump_load("prof_realloc_grow");
  pc_sum_t s = pc_sum(&P, "grow_loop", "main");
  double objs = N, bytes = 0, vo = 0, vb = 0, R = (double)P.rate;
  for (unsigned i = 0; i < N; i++) bytes += LO + (i * 7 + 3) % SPAN;
  if (exact) {
    CHECK_EQ_U(P.rate, 1);
    printf("exact: %" PRIu64 " allocations, %" PRIu64 " bytes (truth %.0f, %.0f)\n",
           s.an, s.ab, objs, bytes);
    CHECK_EQ_U(s.an, N);
    CHECK_EQ_U(s.ab, (uint64_t)bytes);
    CHECK_EQ_U(s.n, 1);
  } else {
    for (unsigned z = LO; z < LO + SPAN; z++) { /* N / SPAN of each size */
      double p = -expm1(-(double)z / R), n = (double)N / SPAN;
      vo += n * (1 - p) / p;
      vb += (double)z * z * n * (1 - p) / p;
    }
    /* the reader's estimate of the allocated pair (v2 unbiasing) */
    double est_n = 0, est_b = 0;
    for (int i = 0; i < P.nrec; i++) {
      const pc_rec_t *r = &P.rec[i];
      if (strcmp(pc_fn(r->f[0]), "grow_loop") || r->an == 0) continue;
      double sc = 1 / -expm1(-((double)r->ab / (double)r->an) / R);
      est_n += (double)r->an * sc;
      est_b += (double)r->ab * sc;
    }
    printf("sampled (R %.0f): %.0f allocations, %.0f bytes; truth %.0f, %.0f; "
           "6 sd %.0f, %.0f\n", R, est_n, est_b, objs, bytes, 6 * sqrt(vo),
           6 * sqrt(vb));
    CHECK(fabs(est_n - objs) <= 6 * sqrt(vo));
    CHECK(fabs(est_b - bytes) <= 6 * sqrt(vb));
  }
  pc_free(&P);
  t_free(blk);
  printf("prof_realloc_grow: ok\n");
  return 0;
}
