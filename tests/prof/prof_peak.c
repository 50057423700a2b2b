/* prof_peak.c -- the peak-heap profile (issue 13, "Peak profile") against
 * a model of what this program allocated.
 *
 * exact (NALLOC_CONF=prof:true,lg_prof_sample:0,prof_peak:true): one
 *   thread runs 300,000 random allocations and frees from 8 call sites,
 *   sizes 1-3000 bytes, drifting upwards with frees interleaved (so the
 *   heap sets a new highest point, then shrinks, many times over). The
 *   model keeps each site's live objects and bytes, and a copy of them
 *   whenever its total passes the highest so far. prof.dump_peak must
 *   equal that copy exactly, site by site, three times: in the middle of
 *   the run (the peak so far), at the end, and after everything is freed.
 *   A normal dump must equal the model's current state meanwhile.
 * threads (same conf): 4 threads do the same under one mutex (so the model
 *   sees one order); the peak written must be one moment's state whose
 *   total is at most the model's highest and at least that minus 64 KiB
 *   per other thread (the bound the README gives).
 * sampled (lg_prof_sample:12): phases with a known peak; each site's
 *   estimate within 6 standard deviations of its count at the peak.
 * off (prof_peak off): prof.dump_peak answers ENOENT. */
#include "prof_check.h"

#include <pthread.h>

#define NSITE 8
#define NOPS 300000
#define MAXLIVE 100000

typedef struct {
  uint64_t n, b;
} cnt_t;
static cnt_t live[NSITE], at_max[NSITE];
static uint64_t total, max_total;

typedef struct {
  void *p;
  size_t size;
  int site;
} obj_t;
static obj_t objs[MAXLIVE];
static size_t nobj;

#define SITE(k)                                                      \
  NOINL void *peak_site##k(size_t n) {                               \
    void *p = t_malloc(n);                                           \
    __asm__ volatile("" ::"r"(p) : "memory");                        \
    return p;                                                        \
  }
SITE(0) SITE(1) SITE(2) SITE(3) SITE(4) SITE(5) SITE(6) SITE(7)
static void *(*const site_fn[NSITE])(size_t) = {
    peak_site0, peak_site1, peak_site2, peak_site3,
    peak_site4, peak_site5, peak_site6, peak_site7};
static const char *const site_name[NSITE] = {
    "peak_site0", "peak_site1", "peak_site2", "peak_site3",
    "peak_site4", "peak_site5", "peak_site6", "peak_site7"};

static void model_alloc(int site, size_t size, void *p) {
  objs[nobj++] = (obj_t){p, size, site};
  live[site].n++;
  live[site].b += size;
  total += size;
  if (total > max_total) {
    max_total = total;
    memcpy(at_max, live, sizeof live);
  }
}

static void model_free(size_t i) {
  obj_t o = objs[i];
  t_free(o.p);
  live[o.site].n--;
  live[o.site].b -= o.size;
  total -= o.size;
  objs[i] = objs[--nobj];
}

/* One random step: allocate with probability `up`, else free one. */
static void step(double up) {
  bool alloc = nobj == 0 ||
               (nobj < MAXLIVE && (double)(check_rnd() % 1000000) < up * 1e6);
  if (alloc) {
    int site = (int)(check_rnd() % NSITE);
    size_t size = 1 + (size_t)(check_rnd() % 3000);
    void *p = site_fn[site](size);
    CHECK(p);
    model_alloc(site, size, p);
  } else {
    model_free((size_t)(check_rnd() % nobj));
  }
}

/* The test's own reading of dumps (stdio, parse buffers) must not move
 * the profiled heap: this thread stops sampling meanwhile (objects not
 * sampled are not counted anywhere, nor their frees). */
static void harness(bool on) { ctl_bool("thread.prof.active", !on); }

static pc_prof_t load(const char *tag, bool peak) {
  char path[256];
  snprintf(path, sizeof path, "prof_peak.%d.%s.heap", (int)getpid(), tag);
  const char *p = path;
  CHECK(nalloc_ctl(peak ? "prof.dump_peak" : "prof.dump", NULL, NULL, &p,
                   sizeof p) == 0);
  harness(true);
  pc_prof_t P = pc_load(path);
  unlink(path);
  return P;
}

static void unload(pc_prof_t *P) {
  pc_free(P);
  harness(false);
}

/* The dump's sites equal `want` exactly (exact mode). */
static void check_exact(const char *tag, bool peak, const cnt_t *want) {
  pc_prof_t P = load(tag, peak);
  CHECK_EQ_U(P.rate, 1);
  uint64_t tb = 0;
  for (int k = 0; k < NSITE; k++) {
    pc_sum_t s = pc_sum(&P, site_name[k], NULL);
    if (s.n != want[k].n || s.b != want[k].b) {
      fprintf(stderr, "%s: %s is %" PRIu64 ": %" PRIu64 ", expected %" PRIu64
              ": %" PRIu64 "\n", tag, site_name[k], s.n, s.b, want[k].n,
              want[k].b);
      exit(1);
    }
    if (peak) CHECK(s.an == s.n && s.ab == s.b); /* [alloc] = in use */
    tb += s.b;
  }
  printf("%s: %s matches the model (%" PRIu64 " bytes at the sites)\n", tag,
         peak ? "peak profile" : "dump", tb);
  unload(&P);
}

static void exact(void) {
  for (int i = 0; i < NOPS; i++) {
    /* drift up in waves: the heap sets new highs and falls back */
    double up = (i / 20000) % 3 == 2 ? 0.4 : 0.6;
    step(up);
    if (i == NOPS / 2) {
      check_exact("mid-peak", true, at_max);
      check_exact("mid-now", false, live);
    }
  }
  check_exact("end-peak", true, at_max);
  check_exact("end-now", false, live);
  while (nobj) model_free(nobj - 1);
  check_exact("freed-peak", true, at_max);
  printf("exact: highest total %" PRIu64 " bytes\n", max_total);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
#define NTHR 4
static void *thr(void *arg) {
  (void)arg;
  for (int i = 0; i < NOPS / NTHR; i++) {
    pthread_mutex_lock(&mu);
    step((i / 5000) % 3 == 2 ? 0.4 : 0.6);
    pthread_mutex_unlock(&mu);
  }
  return NULL;
}

static void threads(void) {
  pthread_t t[NTHR];
  for (int i = 0; i < NTHR; i++) CHECK(pthread_create(&t[i], NULL, thr, NULL) == 0);
  for (int i = 0; i < NTHR; i++) CHECK(pthread_join(t[i], NULL) == 0);
  pc_prof_t P = load("threads", true);
  uint64_t tb = 0;
  for (int k = 0; k < NSITE; k++) tb += pc_sum(&P, site_name[k], NULL).b;
  printf("threads: peak profile %" PRIu64 " bytes, model's highest %" PRIu64
         " (bound %" PRIu64 ")\n", tb, max_total, (uint64_t)(NTHR - 1) << 16);
  CHECK(tb <= max_total);
  CHECK(tb + ((uint64_t)(NTHR - 1) << 16) >= max_total);
  unload(&P);
  while (nobj) model_free(nobj - 1);
}

/* Phases with a known peak: sites 0-3 hold N objects of their size at the
 * peak, then sites 0 and 1 are freed and 4-5 allocate less than that. */
static void sampled(void) {
  static const size_t sz[6] = {24, 200, 1500, 9000, 64, 700};
  static const unsigned cnt[6] = {60000, 20000, 4000, 800, 10000, 2000};
  for (int k = 0; k < 4; k++)
    for (unsigned i = 0; i < cnt[k]; i++) model_alloc(k, sz[k], site_fn[k](sz[k]));
  for (size_t i = nobj; i-- > 0;)
    if (objs[i].site <= 1) model_free(i);
  for (int k = 4; k < 6; k++)
    for (unsigned i = 0; i < cnt[k]; i++) model_alloc(k, sz[k], site_fn[k](sz[k]));
  CHECK(total < max_total);
  pc_prof_t P = load("sampled", true);
  double R = (double)P.rate;
  for (int k = 0; k < 6; k++) {
    pc_sum_t s = pc_sum(&P, site_name[k], NULL);
    double p = -expm1(-(double)sz[k] / R);
    double n = (double)at_max[k].n, sd = sqrt(n * (1 - p) / p);
    printf("sampled: %s at the peak %.0f objects, estimate %.0f (6 sd %.0f)\n",
           site_name[k], n, s.est_n, 6 * sd);
    CHECK(fabs(s.est_n - n) <= 6 * sd + 2);
  }
  unload(&P);
  while (nobj) model_free(nobj - 1);
}

int main(int argc, char **argv) {
  check_rng = 88172645463325252ull;
  const char *mode = argc > 1 ? argv[1] : "exact";
  setvbuf(stdout, NULL, _IONBF, 0); /* no buffer allocated mid-run */
  if (!strcmp(mode, "off")) {
    const char *p = "/dev/null";
    CHECK(nalloc_ctl("prof.dump_peak", NULL, NULL, &p, sizeof p) == ENOENT);
  } else if (!strcmp(mode, "exact")) {
    exact();
  } else if (!strcmp(mode, "threads")) {
    threads();
  } else if (!strcmp(mode, "sampled")) {
    sampled();
  } else {
    return 2;
  }
  printf("prof_peak %s: ok\n", mode);
  return 0;
}
