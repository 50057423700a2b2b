/* prof_sampled.c -- sampled mode (lg_prof_sample:10, R = 1024 bytes) is an
 * unbiased estimate: after the readers' heap_v2 correction (computed here
 * as google-pprof/Go do it), each stack's live bytes and objects come out
 * within 5% of the truth, for three rounds with fresh random streams
 * (prof.reset gives each round a new tdata and PRNG state).
 *
 * Why 5% is safe: with per-byte sampling the estimate of S bytes made of
 * objects of Z << R bytes has a standard deviation of about sqrt(S*R)
 * (objects: sqrt(S*R)/Z). Each stack holds S = 16 MiB, so the relative
 * sigma is sqrt(1024/16.7e6) = 0.78%: 5% is 6.4 sigma. Objects of 64 KiB
 * (Z >> R) are sampled with probability ~1 and come out almost exact.
 * Freeing everything brings each stack back to exactly 0 live.
 *
 * Arguments LG MIB TOL% run it at another rate: at lg_prof_sample >= 16
 * sampled blocks get pages of their own (malloc.c), which this covers with
 * `16 64 25` (sigma sqrt(65536/64 MiB) = 3.1%: 25% is 8 sigma). */
#include "prof_check.h"

#include <unistd.h>

static size_t S_TOTAL = 16u << 20;
static double TOL = 0.05;
#define NA (S_TOTAL / 100)
#define NB (S_TOTAL / 4000)
#define NC (S_TOTAL / 65536)
static void **va, **vb, **vc;

NOINL void alloc_small_objs(void) {
  for (unsigned i = 0; i < NA; i++) va[i] = t_malloc(100);
  __asm__ volatile("");
}
NOINL void alloc_mid_objs(void) {
  for (unsigned i = 0; i < NB; i++) vb[i] = t_malloc(4000);
  __asm__ volatile("");
}
NOINL void alloc_big_objs(void) {
  for (unsigned i = 0; i < NC; i++) vc[i] = t_malloc(65536);
  __asm__ volatile("");
}

static void near(const char *what, int round, double est, double truth) {
  double rel = est / truth - 1;
  printf("round %d %-18s estimate %.0f truth %.0f (%+.2f%%)\n", round, what,
         est, truth, rel * 100);
  CHECK(rel < TOL && rel > -TOL);
}

int main(int argc, char **argv) {
  size_t lg_arg = argc > 1 ? strtoul(argv[1], NULL, 10) : 10;
  if (argc > 2) S_TOTAL = strtoul(argv[2], NULL, 10) << 20;
  if (argc > 3) TOL = atof(argv[3]) / 100;
  /* Metadata for the test's own pointer arrays must not be sampled. */
  va = t_malloc(NA * sizeof *va);
  vb = t_malloc(NB * sizeof *vb);
  vc = t_malloc(NC * sizeof *vc);
  CHECK(va && vb && vc);
  for (int round = 1; round <= 3; round++) {
    size_t lg = lg_arg;
    CHECK(nalloc_ctl("prof.reset", NULL, NULL, &lg, sizeof lg) == 0);
    alloc_small_objs();
    alloc_mid_objs();
    alloc_big_objs();
    char path[256];
    snprintf(path, sizeof path, "prof_sampled.%d.%d.heap", (int)getpid(), round);
    CHECK(ctl_dump(path) == 0);
    pc_prof_t P = pc_load(path);
    char label[64];
    snprintf(label, sizeof label, "heap_v2/%zu", (size_t)1 << lg);
    CHECK(strcmp(P.label, label) == 0);
    pc_sum_t A = pc_sum(&P, "alloc_small_objs", "main");
    pc_sum_t B = pc_sum(&P, "alloc_mid_objs", "main");
    pc_sum_t C = pc_sum(&P, "alloc_big_objs", "main");
    near("small bytes", round, A.est_b, (double)NA * 100);
    near("small objects", round, A.est_n, NA);
    near("mid bytes", round, B.est_b, (double)NB * 4000);
    near("mid objects", round, B.est_n, NB);
    near("big bytes", round, C.est_b, (double)NC * 65536);
    near("big objects", round, C.est_n, NC);
    pc_free(&P);
    unlink(path);
    for (unsigned i = 0; i < NA; i++) t_free(va[i]);
    for (unsigned i = 0; i < NB; i++) t_free(vb[i]);
    for (unsigned i = 0; i < NC; i++) t_free(vc[i]);
    CHECK(ctl_dump(path) == 0);
    P = pc_load(path);
    A = pc_sum(&P, "alloc_small_objs", "main");
    B = pc_sum(&P, "alloc_mid_objs", "main");
    C = pc_sum(&P, "alloc_big_objs", "main");
    CHECK_EQ_U(A.n + B.n + C.n, 0);
    CHECK_EQ_U(A.b + B.b + C.b, 0);
    CHECK(A.an > 0 && B.an > 0 && C.an > 0);
    pc_free(&P);
    unlink(path);
  }
  printf("prof_sampled: ok\n");
  return 0;
}
