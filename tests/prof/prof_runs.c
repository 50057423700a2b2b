/* prof_runs.c -- the page runs of sampled small blocks and the thread
 * heap's cache of freed ones (alloc/sample_run.c), at a rate where sampled
 * small blocks get pages of their own (lg_prof_sample >= 16; argument 1,
 * default 16):
 * - churn: a working set of blocks of log-uniform sizes, replaced at
 *   random, so that freed runs are reused by later samples; every block
 *   keeps its own tag at both ends (checked before its free: no two live
 *   blocks overlap) and every calloc reads as zeros (a reused run is
 *   dirty);
 * - the profile of the live working set after the churn is an unbiased
 *   estimate: within 6 standard deviations of the truth (plus one
 *   sample's step), the deviation computed from the live blocks themselves
 *   (an object of s bytes is sampled with P = 1-exp(-s/R) and counts s/P
 *   bytes: variance s^2 (1-P)/P), and exactly 0 live once everything is
 *   freed;
 * - a freed run is reused: the next own-page sample of the same length
 *   gets the same address; its second free aborts (in a child) as a bad
 *   pointer;
 * - runs freed by a thread that then exits, and thread.tcache.flush,
 *   give their pages back without harm;
 * - sampled blocks of 4 KiB or more stay in their spans (SAMPLE_SPAN_MIN,
 *   alloc/sample.h), whose frees are fast again once no sample in them is
 *   live: blocks freed half by their thread and half by another, in
 *   rounds that reuse the same slots, every free finding its record (the
 *   debug build asserts it on the fast path; a sampled block freed there
 *   would stay live in the profile, which must read exactly 0). */
#include "prof_check.h"

#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#ifdef NALLOC_TEST_PREFIXED
#define t_usable nalloc_malloc_usable_size
#else
#define t_usable malloc_usable_size
#endif

#define W 2048
#define OPS 60000
static void *blk[W];
static size_t bsz[W];
static uint64_t btag[W];
/* log-uniform in [1 KiB, 64 KiB]: runs of 1 to 16 pages (the estimate
 * of objects of a few bytes at R = 2^19, each sampled one counting for
 * R/s of them, is too skewed for the bound below to say much) */
static size_t rnd_size(void) {
  double u = (double)(check_rnd() >> 11) * 0x1p-53;
  return (size_t)(1024 * pow(64, u));
}

static void stamp(void *p, size_t s, uint64_t tag) {
  memcpy(p, &tag, 8);
  memcpy((char *)p + s - 8, &tag, 8);
}
static void check_stamp(const void *p, size_t s, uint64_t tag) {
  uint64_t a, b;
  memcpy(&a, p, 8);
  memcpy(&b, (const char *)p + s - 8, 8);
  CHECK(a == tag && b == tag);
}

NOINL void *churn_alloc(size_t s, bool zero) {
  void *p = zero ? t_calloc(1, s) : t_malloc(s);
  __asm__ volatile("" ::: "memory");
  return p;
}

NOINL void churn(void) {
  for (long i = 0; i < OPS; i++) {
    size_t k = check_rnd() % W;
    if (blk[k]) {
      check_stamp(blk[k], bsz[k], btag[k]);
      t_free(blk[k]);
    }
    size_t s = rnd_size();
    bool zero = i % 3 == 0;
    unsigned char *p = churn_alloc(s, zero);
    CHECK(p != NULL);
    if (zero)
      for (size_t j = 0; j < s; j++) CHECK(p[j] == 0);
    blk[k] = p, bsz[k] = s, btag[k] = check_rnd();
    stamp(p, s, btag[k]);
  }
}

static void check_profile(unsigned lg) {
  char path[256];
  snprintf(path, sizeof path, "prof_runs.%d.heap", (int)getpid());
  CHECK(ctl_dump(path) == 0);
  pc_prof_t P = pc_load(path);
  pc_sum_t S = pc_sum(&P, "churn_alloc", "churn");
  /* Truth, and the estimate's deviation from the live blocks: a block of s
   * bytes is sampled with P = 1-exp(-s/R) and then counts s/P bytes and
   * 1/P objects (variance s^2 (1-P)/P and (1-P)/P). The bound is 6 sigma
   * plus the largest step one sample makes (mb, mn): the sums are of few
   * large, skewed terms, not yet Gaussian. */
  double R = ldexp(1, (int)lg), tb = 0, tn = 0, vb = 0, vn = 0, mb = 0, mn = 0;
  for (size_t k = 0; k < W; k++) {
    if (!blk[k]) continue;
    double s = (double)bsz[k], p = -expm1(-s / R);
    tb += s, tn += 1;
    vb += s * s * (1 - p) / p, vn += (1 - p) / p;
    if (s / p > mb) mb = s / p;
    if (1 / p > mn) mn = 1 / p;
  }
  double sb = sqrt(vb), sn = sqrt(vn);
  printf("lg %u: live bytes estimate %.0f truth %.0f (sigma %.0f), objects %.0f truth %.0f "
         "(sigma %.0f), %" PRIu64 " sampled live\n",
         lg, S.est_b, tb, sb, S.est_n, tn, sn, S.n);
  fflush(stdout);
  CHECK(fabs(S.est_b - tb) < 6 * sb + mb);
  CHECK(fabs(S.est_n - tn) < 6 * sn + mn);
  pc_free(&P);
  for (size_t k = 0; k < W; k++)
    if (blk[k]) {
      check_stamp(blk[k], bsz[k], btag[k]);
      t_free(blk[k]);
      blk[k] = NULL;
    }
  CHECK(ctl_dump(path) == 0);
  P = pc_load(path);
  S = pc_sum(&P, "churn_alloc", "churn");
  CHECK_EQ_U(S.n, 0);
  CHECK_EQ_U(S.b, 0);
  CHECK(S.an > 0);
  pc_free(&P);
  unlink(path);
}

/* A 100-byte block on a page of its own: a sample (its class is 112). */
static void *own_page_block(void) {
  static void *spare[20000]; /* misses 1 - 100/R each: 20,000 are e^-30 at lg 16 */
  int n = 0;
  void *p;
  for (;;) {
    p = t_malloc(100);
    CHECK(p != NULL);
    if (t_usable(p) == 4096) break;
    CHECK(n < 20000);
    spare[n++] = p;
  }
  while (n > 0) t_free(spare[--n]);
  return p;
}

static void check_reuse(void) {
  CHECK(nalloc_ctl("thread.tcache.flush", NULL, NULL, NULL, 0) == 0); /* no kept run */
  void *p = own_page_block();
  t_free(p);
  pid_t c = fork();
  CHECK(c >= 0);
  if (c == 0) {
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) dup2(fd, 2); /* the abort's message */
    t_free(p);               /* a kept run: a bad pointer */
    _exit(0);
  }
  int st;
  CHECK(waitpid(c, &st, 0) == c);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  void *q = own_page_block();
  CHECK(q == p); /* the kept one-page run */
  t_free(q);
}

NOINL void *span_alloc(size_t s) {
  void *p = t_malloc(s);
  __asm__ volatile("" ::: "memory");
  return p;
}

static void *free_list(void *arg) {
  void **v = arg;
  for (size_t k = 0; v[k] != NULL; k++) t_free(v[k]);
  return NULL;
}

static void check_in_span(void) {
  static void *mine[W], *theirs[W + 1];
  for (int round = 0; round < 16; round++) {
    size_t nm = 0, nt = 0;
    for (size_t k = 0; k < W; k++) {
      void *p = span_alloc(4096 + check_rnd() % 12288);
      CHECK(p != NULL);
      if (check_rnd() & 1) theirs[nt++] = p;
      else mine[nm++] = p;
    }
    theirs[nt] = NULL;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_list, theirs) == 0);
    for (size_t k = 0; k < nm; k++) t_free(mine[k]);
    CHECK(pthread_join(t, NULL) == 0);
  }
  char path[256];
  snprintf(path, sizeof path, "prof_runs.%d.heap", (int)getpid());
  CHECK(ctl_dump(path) == 0);
  pc_prof_t P = pc_load(path);
  pc_sum_t S = pc_sum(&P, "span_alloc", NULL);
  printf("in span: %" PRIu64 " sampled, %" PRIu64 " live\n", S.an, S.n);
  CHECK(S.an > 0);
  CHECK_EQ_U(S.n, 0);
  CHECK_EQ_U(S.b, 0);
  pc_free(&P);
  unlink(path);
}

static void *sampler(void *arg) {
  (void)arg;
  for (int i = 0; i < 4; i++) t_free(own_page_block());
  return NULL; /* the kept runs go back at exit */
}

int main(int argc, char **argv) {
  check_rng = 88172645463325252ull;
  unsigned lg = argc > 1 ? (unsigned)atoi(argv[1]) : 16;
  size_t lgz = lg;
  CHECK(nalloc_ctl("prof.reset", NULL, NULL, &lgz, sizeof lgz) == 0);
  churn();
  check_profile(lg);
  if (lg <= 17) { /* own-page blocks of 100 bytes are found quickly */
    check_reuse();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, sampler, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
  }
  CHECK(nalloc_ctl("thread.tcache.flush", NULL, NULL, NULL, 0) == 0);
  churn();
  check_profile(lg);
  check_in_span();
  printf("prof_runs: ok\n");
  return 0;
}
