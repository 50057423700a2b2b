/* prof_temp.c -- short-lived allocations per stack (issue 14.3), against
 * a model the test keeps.
 *
 * exact (lg_prof_sample:0): "temporary" allocations in heaptrack's sense,
 *   blocks their thread frees before it allocates anything else. The
 *   program mixes call sites whose blocks are freed at once, later, after
 *   another allocation, by another thread, through realloc, calloc and
 *   large blocks; the model applies the definition to every allocation
 *   and free it makes (it calls nothing that allocates in between), and
 *   the '#nalloc temporary' line of each stack must equal it.
 * sampled: each sampled block keeps its birth time (lg_prof_sample >= 16:
 *   in the record of its page run of its own; below: beside its slot's
 *   record in its small span). Blocks of one site live at least 30 ms
 *   (nanosleep), those of another are freed at once: the '#nalloc
 *   lifetime' histogram of each site must count every sampled object
 *   freed (the record's sampled count: with one size per stack the
 *   pre-biased count is the raw one) and put the long-lived ones in
 *   buckets of 30 ms and up. */
#include "prof_check.h"

#include <pthread.h>
#include <time.h>

enum { S_NOW, S_LATER, S_CALLOC, S_REALLOC, S_BIG, S_REMOTE, S_N };
static const char *const site_fn[S_N] = {"site_now",   "site_later",
                                         "site_calloc", "site_realloc",
                                         "site_big",   "site_remote"};
static uint64_t temp_model[S_N];

/* The model: the thread's last allocation (what nalloc's rule sees). */
static __thread const void *last;
static __thread int last_site;

NOINL void *site_now(size_t n) { return t_malloc(n); }
NOINL void *site_later(size_t n) { return t_malloc(n); }
NOINL void *site_calloc(size_t n) { return t_calloc(1, n); }
NOINL void *site_realloc(void *p, size_t n) { return t_realloc(p, n); }
NOINL void *site_big(size_t n) { return t_malloc(n); }
NOINL void *site_remote(size_t n) { return t_malloc(n); }

static void *got(void *p, int site) {
  CHECK(p != NULL);
  last = p;
  last_site = site;
  return p;
}
static void put(void *p, int site) {
  if (p == last) {
    temp_model[site]++;
    last = NULL;
  }
  t_free(p);
}

static void *remote_blocks[64];
static void *remote_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 64; i++) remote_blocks[i] = site_remote(48);
  return NULL;
}

static int exact(const char *path) {
  void *keep[100];
  for (int round = 0; round < 50; round++) {
    /* freed at once: temporary */
    put(got(site_now(32), S_NOW), S_NOW);
    put(got(site_calloc(200), S_CALLOC), S_CALLOC);
    /* freed after another allocation: not */
    void *a = got(site_later(64), S_LATER);
    void *b = got(site_now(16), S_NOW);
    put(a, S_LATER);
    put(b, S_NOW); /* b was the last allocation, but a's free came first:
                      nothing was allocated since b, so b is temporary */
    /* kept a while, then freed in reverse: only the first free, of the
     * newest block, is temporary */
    for (int i = 0; i < 5; i++) keep[i] = got(site_later(24 + (size_t)i), S_LATER);
    for (int i = 4; i >= 0; i--) put(keep[i], S_LATER);
    /* realloc: the new block is allocated before the old one is freed
     * (the old one is not temporary, whatever it was); the last one freed
     * at once is */
    void *r = got(site_realloc(NULL, 40), S_REALLOC);
    /* r2 is allocated, then r freed (r2 is the newest: r is not
     * temporary); a realloc in place counts as a new allocation too */
    void *r2 = got(site_realloc(r, 4000), S_REALLOC);
    put(r2, S_REALLOC);
    /* large blocks (a page run each) */
    put(got(site_big(200000), S_BIG), S_BIG);
    void *g = got(site_big(100000), S_BIG);
    void *h = got(site_later(8), S_LATER);
    put(g, S_BIG);
    put(h, S_LATER);
  }
  /* Blocks of another thread, freed here: never temporary (the rule is the
   * allocating thread's), even when it is the newest block of that thread. */
  pthread_t th;
  CHECK(pthread_create(&th, NULL, remote_thread, NULL) == 0);
  pthread_join(th, NULL);
  last = NULL; /* pthread_create and join allocated here (TLS, stacks) */
  for (int i = 63; i >= 0; i--) put(remote_blocks[i], S_REMOTE);

  CHECK(ctl_dump(path) == 0);
  pc_prof_t P = pc_load(path);
  CHECK_EQ_U(P.rate, 1);
  for (int k = 0; k < S_N; k++) {
    pc_sum_t t = pc_sum_kind(&P, PC_TEMP, 0, site_fn[k], NULL);
    pc_sum_t all = pc_sum(&P, site_fn[k], NULL);
    printf("%-13s temporary %4" PRIu64 " of %4" PRIu64 " allocations  model %" PRIu64
           "\n", site_fn[k], t.an, all.an, temp_model[k]);
    CHECK_EQ_U(t.an, temp_model[k]);
    CHECK(t.an <= all.an);
  }
  CHECK(temp_model[S_NOW] == 100 && temp_model[S_REMOTE] == 0);
  pc_free(&P);
  return 0;
}

NOINL void *life_short(size_t n) { return t_malloc(n); }
NOINL void *life_long(size_t n) { return t_malloc(n); }

#define LONG_NS 30000000ull /* 30 ms */
/* prof_internal.h's buckets: bucket k >= 1 holds [2^(8+2k), 2^(10+2k)) ns */
static int life_bkt(uint64_t ns) {
  if (ns < 1024) return 0;
  int lg = 63 - __builtin_clzll(ns);
  int k = (lg - 10) / 2 + 1;
  return k < PC_LIFE_N ? k : PC_LIFE_N - 1;
}

static int sampled(const char *path) {
  /* 4 KiB blocks: at R = 2^16 about one in 16 is sampled, at 2^12 63% */
  for (int i = 0; i < 4000; i++) t_free(life_short(4096));
  static void *hold[400];
  for (int round = 0; round < 4; round++) {
    for (int i = 0; i < 100; i++) hold[i] = life_long(4096);
    struct timespec ts = {0, (long)LONG_NS + 1000000};
    nanosleep(&ts, NULL);
    for (int i = 0; i < 100; i++) t_free(hold[i]);
  }
  CHECK(ctl_dump(path) == 0);
  pc_prof_t P = pc_load(path);
  CHECK(P.rate > 1);
  int min_long = life_bkt(LONG_NS);
  for (int w = 0; w < 2; w++) {
    const char *fn = w ? "life_long" : "life_short";
    pc_sum_t rec = pc_sum(&P, fn, NULL);
    pc_sum_t l = pc_sum_kind(&P, PC_LIFE, 0, fn, NULL);
    uint64_t n = 0, fast = 0;
    printf("%s: %" PRIu64 " sampled, freed; lifetimes:", fn, rec.an - rec.n);
    for (int k = 0; k < PC_LIFE_N; k++) {
      printf(" %" PRIu64, l.life[k]);
      n += l.life[k];
      if (k <= life_bkt(4000000)) fast += l.life[k];
      if (w) CHECK(l.life[k] == 0 || k >= min_long);
    }
    printf("\n");
    /* one size per stack: the pre-biased count is the sampled count */
    CHECK_EQ_U(n, rec.an - rec.n);
    CHECK(n > 0);
    if (!w) CHECK(fast * 10 >= n * 9); /* freed at once: under 4 ms */
  }
  pc_free(&P);
  return 0;
}

int main(int argc, char **argv) {
  char path[] = "/tmp/prof_temp.XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  int r = argc > 1 && strcmp(argv[1], "sampled") == 0 ? sampled(path)
                                                       : exact(path);
  unlink(path);
  if (r == 0) printf("ok\n");
  return r;
}
