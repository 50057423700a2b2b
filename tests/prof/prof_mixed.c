/* prof_mixed.c -- stacks that allocate a mix of sizes, for the sampled
 * profile test (issue 13 item 1; mixed.sh runs the readers on its dumps).
 *
 *   prof_mixed LG FILE
 *
 * re-samples at lg_prof_sample LG (prof.reset), then lets NSTACKS distinct
 * stacks each allocate NS small objects and NB big ones from one call
 * site (half of the big ones 1/8 larger: the same size bucket, so a line
 * also mixes sizes within its bucket), keeps them all live, dumps to FILE,
 * and prints the truth and the standard deviation a correct estimate has:
 *
 *   truth OBJECTS BYTES SD_OBJECTS SD_BYTES LINES
 *
 * With per-byte sampling at rate 1/R an object of Z bytes is sampled with
 * probability p = 1-exp(-Z/R), and the estimate of N such objects, k/p
 * with k ~ Binomial(N, p), has variance N(1-p)/p (bytes: Z^2 times that).
 * LINES bounds the number of record lines (every stack, every size), for
 * the readers that truncate each line's estimate to an integer.
 *
 * Sizes: 16 B and 1 KiB (the mix of the issue) at LG <= 14, 4096 stacks at
 * LG 12 and 1024 at 14. Above, R/256 and R/16 with fewer stacks (the
 * memory a precise estimate needs grows with R): enough samples for a 6
 * sigma bound that still catches a profile whose counts collapse. */
#include "prof_check.h"

#define NS 500
#define NB 40
#define DEPTH 12

static size_t zs, zb, zb2;
static void **objs;
static size_t nobj;

/* One call site for every size: one stack. */
NOINL void mixed_leaf(void) {
  for (int i = 0; i < NS + NB; i++) {
    size_t z = i < NS ? zs : (i % 2 ? zb2 : zb);
    objs[nobj++] = t_malloc(z);
  }
  __asm__ volatile("" ::: "memory");
}

/* Two call sites per level: the bits of `path` pick the stack. */
NOINL void mixed_0(unsigned path, int d);
NOINL void mixed_1(unsigned path, int d);
NOINL void mixed_0(unsigned path, int d) {
  if (d == 0) mixed_leaf();
  else if (path & 1) mixed_1(path >> 1, d - 1);
  else mixed_0(path >> 1, d - 1);
  __asm__ volatile("");
}
NOINL void mixed_1(unsigned path, int d) {
  if (d == 0) mixed_leaf();
  else if (path & 1) mixed_1(path >> 1, d - 1);
  else mixed_0(path >> 1, d - 1);
  __asm__ volatile("");
}

static double var_est(double n, double z, double r) {
  double p = -expm1(-z / r);
  return n * (1 - p) / p;
}

int main(int argc, char **argv) {
  CHECK(argc == 3);
  size_t lg = strtoul(argv[1], NULL, 10);
  double R = (double)((uint64_t)1 << lg);
  unsigned nstacks;
  if (lg <= 14) {
    zs = 16, zb = 1024;
    nstacks = lg <= 12 ? 4096 : 1024;
  } else {
    zs = (size_t)R / 256, zb = (size_t)R / 16;
    nstacks = lg <= 17 ? 128 : 32;
  }
  zb2 = zb + zb / 8;
  int depth = 0;
  while ((1u << depth) < nstacks) depth++;
  CHECK(depth <= DEPTH);
  objs = t_malloc((size_t)nstacks * (NS + NB) * sizeof *objs);
  CHECK(objs);
  CHECK(nalloc_ctl("prof.reset", NULL, NULL, &lg, sizeof lg) == 0);
  for (unsigned s = 0; s < nstacks; s++) mixed_0(s, depth);
  CHECK(ctl_dump(argv[2]) == 0);
  double n = nstacks;
  double objects = n * (NS + NB);
  double bytes = n * (NS * (double)zs + NB / 2 * ((double)zb + (double)zb2));
  double vo = var_est(n * NS, (double)zs, R) + var_est(n * NB / 2, (double)zb, R) +
              var_est(n * NB / 2, (double)zb2, R);
  double vb = (double)zs * zs * var_est(n * NS, (double)zs, R) +
              (double)zb * zb * var_est(n * NB / 2, (double)zb, R) +
              (double)zb2 * zb2 * var_est(n * NB / 2, (double)zb2, R);
  printf("truth %.0f %.0f %.0f %.0f %u\n", objects, bytes, sqrt(vo), sqrt(vb),
         nstacks * 3);
  for (size_t i = 0; i < nobj; i++) t_free(objs[i]);
  t_free(objs);
  return 0;
}
