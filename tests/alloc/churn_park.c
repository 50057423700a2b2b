/* churn_park.c -- spans of exiting threads (issue 11/12, thread churn):
 * a thread's spans go to its arena when it exits, empty ones included, and
 * the next threads take them instead of new ones; memory kept that way
 * still leaves the process within the decay time.
 *
 *   churn_park [waves|outstanding|idle]
 *
 * waves        waves of short threads, each allocating and freeing blocks
 *              of 48 classes: after the first wave, later ones map nothing
 *              (stats.mapped does not grow) and every block is freed
 *              (stats.allocated back to where it started).
 * outstanding  threads exit with their blocks still live in the main
 *              thread, which frees them after; the next wave of the same
 *              work maps nothing more.
 * idle         (background_thread:true, a short dirty_decay_ms) a thread
 *              holds empty spans of many classes, waits until the page
 *              heap has nothing left to decay, and exits: with no call into
 *              nalloc from then on, the decay thread must give those spans'
 *              pages back (the RSS falls by 3/4 of them within 20 s). */
#include <stdatomic.h>
#include <time.h>

#include "check.h"

#define NCLS 48
#define PER 64 /* blocks per class per thread */
#define RSS_CHECKED (!CHECK_ASAN && !CHECK_TSAN)

static size_t cls_size(int c) { return 16 + (size_t)c * 48; } /* 16 .. 2,272 B */

/* Allocates PER blocks of each class, writes them, frees them unless
 * `keep` (then they go to keep[], freed by the caller). */
static void *churn(void *keep) {
  void **out = keep, *local[NCLS * PER];
  void **v = out ? out : local;
  for (int i = 0; i < NCLS * PER; i++) {
    v[i] = A_MALLOC(cls_size(i % NCLS));
    CHECK(v[i] != NULL);
    memset(v[i], i & 0xff, cls_size(i % NCLS));
  }
  if (out == NULL)
    for (int i = 0; i < NCLS * PER; i++) A_FREE(v[i]);
  return NULL;
}

static void wave(int nthreads, void **keep) {
  for (int t = 0; t < nthreads; t++) {
    pthread_t th;
    CHECK(pthread_create(&th, NULL, churn, keep ? keep + (size_t)t * NCLS * PER : NULL) == 0);
    CHECK(pthread_join(th, NULL) == 0);
  }
  if (keep == NULL) return;
  for (size_t i = 0; i < (size_t)nthreads * NCLS * PER; i++) {
    unsigned char *p = keep[i];
    CHECK(p[0] == (unsigned char)(i % (NCLS * PER)));
    A_FREE(p);
  }
}

static void run_waves(bool outstanding) {
  enum { T = 8 };
  void **keep = outstanding ? malloc(sizeof(void *) * T * NCLS * PER) : NULL;
  CHECK(!outstanding || keep != NULL);
  size_t a0 = stat_allocated();
  wave(T, keep);
  size_t m1 = stat_mapped();
  for (int w = 0; w < 4; w++) wave(T, keep);
  size_t m5 = stat_mapped(), a5 = stat_allocated();
  fprintf(stderr, "churn_park %s: mapped %zu -> %zu after 4 more waves\n",
          outstanding ? "outstanding" : "waves", m1, m5);
  CHECKF(m5 <= m1, "mapped grew %zu -> %zu: spans of exited threads not reused", m1, m5);
  CHECKF(a5 <= a0 + 64 * 1024, "stats.allocated %zu -> %zu after every block was freed",
         a0, a5);
  free(keep);
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0) {
  }
}

static size_t active0;
static _Atomic size_t parked; /* bytes of empty spans the thread exits with */
static _Atomic long rss_held;

/* 16 MiB written and freed (the decay thread starts: the arena mapped 8
 * MiB), then the page heap decays to nothing while the thread's heap
 * still holds its empty spans; they go to the arena at exit. */
static void *idle_thread(void *arg) {
  (void)arg;
  enum { N = 16 << 20 >> 10 };
  void **v = malloc(sizeof(void *) * N);
  CHECK(v != NULL);
  for (int i = 0; i < N; i++) {
    v[i] = A_MALLOC(1024 - (size_t)(i % NCLS) * 16);
    CHECK(v[i] != NULL);
    memset(v[i], 1, 1024 - (size_t)(i % NCLS) * 16);
  }
  for (int i = 0; i < N; i++) A_FREE(v[i]);
  free(v);
  churn(NULL); /* a span of each of the 48 classes, empty again */
  for (int i = 0; i < 2000; i++) {
    ctl_refresh();
    if (ctl_size("stats.dirty") + ctl_size("stats.muzzy") == 0) break;
    sleep_ms(10);
  }
  atomic_store(&parked, ctl_size("stats.active") - active0);
  atomic_store(&rss_held, rss_kib());
  return NULL;
}

static void run_idle(void) {
  ctl_refresh();
  active0 = ctl_size("stats.active");
  pthread_t th;
  CHECK(pthread_create(&th, NULL, idle_thread, NULL) == 0);
  CHECK(pthread_join(th, NULL) == 0);
  long held = atomic_load(&rss_held), kib = (long)(atomic_load(&parked) >> 10), now = held;
  /* no call into nalloc from here: only the decay thread can act */
  for (int i = 0; i < 200 && now > held - kib * 3 / 4; i++) {
    sleep_ms(100);
    now = rss_kib();
  }
  fprintf(stderr, "churn_park idle: %ld KiB of empty spans at exit; RSS %ld -> %ld KiB\n",
          kib, held, now);
  CHECKF(kib >= 1024, "the thread exited with only %ld KiB of empty spans", kib);
  if (RSS_CHECKED)
    CHECKF(now <= held - kib * 3 / 4, "RSS %ld -> %ld KiB: %ld KiB of parked spans kept",
           held, now, kib);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "waves";
  if (strcmp(mode, "waves") == 0) run_waves(false);
  else if (strcmp(mode, "outstanding") == 0) run_waves(true);
  else if (strcmp(mode, "idle") == 0) run_idle();
  else CHECKF(false, "unknown mode %s", mode);
  printf("churn_park %s: ok (%s)\n", mode, A_MODE);
  return 0;
}
