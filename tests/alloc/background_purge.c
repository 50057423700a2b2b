/* background_purge: decay (issue 12) -- freed memory goes back to the OS
 * on time, memory reused soon costs no fault, malloc_trim returns all.
 * One mode per ctest entry (NALLOC_CONF set by CMake):
 *
 *   idle     (background_thread:true, a short dirty_decay_ms) 96 MiB in
 *            large and small blocks, written, freed; then no call into
 *            nalloc at all while /proc/self/statm is polled: only the
 *            decay thread can give the pages back. The thread is not
 *            running before the process has mapped memory (lazy start).
 *   poll     (background_thread:false) the same, but the program polls
 *            stats.resident through `epoch`, which runs the decay that is
 *            due: stats.dirty and stats.muzzy fall to 0, the RSS with them.
 *   reuse    (a long dirty_decay_ms with a long muzzy stage) 64 MiB of
 *            large blocks freed and allocated again at once (dirty pages),
 *            then freed, left until decay made them muzzy (MADV_FREE),
 *            and allocated again: neither reuse takes page faults
 *            (getrusage minor faults under 1/4 of the pages; a fresh
 *            touch takes one a page, or one per 64 KiB with populate).
 *   trim     free pages, muzzy ones among them: malloc_trim(0) returns
 *            every one at once (stats.dirty = stats.muzzy = 0, the RSS
 *            falls).
 *   age      (background_thread:false, dirty_decay_ms:1000) pages freed
 *            a few at a time go back on the age of the bulk: a block of
 *            40 MiB, written, shrunk in place to 2 MiB at t0 (38 MiB of
 *            free pages), then at t0 + 0.7 d to 1 MiB (one more MiB, next
 *            to the 38). The merged run is as old as its pages on average,
 *            so at t0 + d + d/16 (past the release age and the gap between
 *            decay walks) decay has given it back. When a merge took the
 *            age of its newest pages, all 39 MiB stayed 0.7 d longer.
 *   wake     (background_thread:true, dirty_decay_ms:8000) the decay
 *            thread wakes for a decay due before the time it sleeps until:
 *            freed memory makes it sleep until that memory goes muzzy
 *            (3.5 s: d - d/2 - d/16); then a thread exits and parks an
 *            empty span, whose reap is due within d/16 (0.5 s). The
 *            thread must walk the arenas again long before the 3.5 s
 *            (it used to sleep through, and the parked span's pages,
 *            reaped late, stayed resident past dirty_decay_ms).
 *   fork     8 threads allocate and free large and small blocks while the
 *            main thread forks 4 children that do the same and wait for
 *            their decay (driven by their calls: a child starts no decay
 *            thread, and has none); then the parent's free memory decays
 *            to 0 too.
 *
 * Bounds are generous (a loaded machine only waits longer: every wait
 * polls for up to 20 s); the RSS bounds are checked in the normal build
 * only (a sanitizer's shadow memory is resident too). */
#include <stdbool.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

#include "check.h"

#define MIB ((size_t)1 << 20)
#define RSS_CHECKED (!CHECK_ASAN && !CHECK_TSAN)

static long minflt(void) {
  struct rusage ru;
  CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
  return ru.ru_minflt;
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0) {
  }
}

static size_t decaying(void) {
  ctl_refresh();
  return ctl_size("stats.dirty") + ctl_size("stats.muzzy");
}

static size_t bg_threads(void) {
  size_t n = 0, len = sizeof n;
  CHECK_CTL("stats.background_thread.num_threads", &n, &len, NULL, 0);
  return n;
}

/* 64 MiB of 1 MiB blocks and 32 MiB of 64 B-16 KiB blocks, written. */
enum { NBIG = 64, NSMALL = 4096 };
static void *big[NBIG], *small[NSMALL];
static size_t small_size(int i) { return (size_t)64 << (i % 9); } /* 64 B .. 16 KiB */

static void fill(void) {
  for (int i = 0; i < NBIG; i++) {
    CHECK((big[i] = A_MALLOC(MIB)) != NULL);
    memset(big[i], 0x5a, MIB);
  }
  for (int i = 0; i < NSMALL; i++) {
    CHECK((small[i] = A_MALLOC(small_size(i))) != NULL);
    memset(small[i], 0xa5, small_size(i));
  }
}

static void release(void) {
  for (int i = 0; i < NBIG; i++) A_FREE(big[i]);
  for (int i = 0; i < NSMALL; i++) A_FREE(small[i]);
  /* the thread's emptied spans go back to the page heap too */
  CHECK_CTL("thread.tcache.flush", NULL, NULL, NULL, 0);
}

static size_t opt_ssize(const char *name) {
  ssize_t v = 0;
  size_t len = sizeof v;
  CHECK_CTL(name, &v, &len, NULL, 0);
  return (size_t)v;
}

/* idle (no call into nalloc while waiting) or poll (through epoch) */
static void mode_idle(bool bg) {
  bool on = false;
  size_t len = sizeof on;
  CHECK_CTL("opt.background_thread", &on, &len, NULL, 0);
  CHECKF(on == bg, "run with NALLOC_CONF=background_thread:%s", bg ? "true" : "false");
  CHECKF(bg_threads() == 0, "the decay thread runs before there was anything to decay");
  long rss0 = rss_kib();
  fill();
  release();
  size_t d = decaying();
  long rss_freed = rss_kib();
  CHECKF(d >= 48 * MIB, "freed pages were returned at once (dirty + muzzy %zu)", d);
  if (bg) CHECKF(bg_threads() == 1, "the decay thread did not start (%zu MiB free)", d / MIB);
  long rss = rss_freed, last = -1;
  uint64_t t0 = (uint64_t)time(NULL);
  for (int i = 0; i < 400; i++) {
    sleep_ms(50);
    last = rss;
    rss = rss_kib();
    if (!bg) d = decaying();
    /* with the thread, no call into nalloc while waiting (reading the
     * stats refreshes them, which decays): its pass is over once the
     * resident set has dropped and stayed put for 50 ms (a check right
     * after the drop could catch it purging the last runs: 4 MB left
     * once in an ASan run at load 11-20) */
    if (rss_freed - rss >= 48 * 1024 && (bg ? rss == last : d == 0)) break;
  }
  d = decaying();
  CHECKF(d == 0, "stats.dirty + stats.muzzy still %zu after %llu s idle", d,
         (unsigned long long)((uint64_t)time(NULL) - t0));
  if (RSS_CHECKED)
    CHECKF(rss_freed - rss >= 48 * 1024, "resident set went only from %ld to %ld KiB", rss_freed,
           rss);
  printf("%s: %zu ms decay; resident %ld KiB at start, %ld freed, %ld after decay\n",
         bg ? "idle (background thread)" : "poll (no thread)", opt_ssize("opt.dirty_decay_ms"),
         rss0, rss_freed, rss);
}

/* Allocates the 64 big blocks again and writes them; the faults taken. */
static long refill_faults(void) {
  long f0 = minflt();
  for (int i = 0; i < NBIG; i++) {
    CHECK((big[i] = A_MALLOC(MIB)) != NULL);
    memset(big[i], 0x3c, MIB);
  }
  return minflt() - f0;
}

static void mode_reuse(void) {
  long pages = (long)(NBIG * MIB / 4096), fresh_f0 = minflt();
  for (int i = 0; i < NBIG; i++) {
    CHECK((big[i] = A_MALLOC(MIB)) != NULL);
    memset(big[i], 0x5a, MIB);
  }
  long fresh = minflt() - fresh_f0;
  for (int i = 0; i < NBIG; i++) A_FREE(big[i]);
  long dirty_f = refill_faults(); /* reused while dirty */
  for (int i = 0; i < NBIG; i++) A_FREE(big[i]);
  /* wait for the muzzy stage: epoch runs the decay that is due */
  size_t muzzy = 0;
  for (int i = 0; i < 400 && muzzy < NBIG * MIB / 2; i++) {
    sleep_ms(50);
    ctl_refresh();
    muzzy = ctl_size("stats.muzzy");
  }
  CHECKF(muzzy >= NBIG * MIB / 2, "freed pages did not go muzzy (stats.muzzy %zu)", muzzy);
  size_t nmuzzied = 0, len = sizeof nmuzzied;
  CHECK_CTL("stats.nmuzzied", &nmuzzied, &len, NULL, 0);
  CHECK(nmuzzied >= NBIG * MIB / 2 / 4096);
  long muzzy_f = refill_faults(); /* reused while muzzy */
  ctl_refresh();
  CHECKF(ctl_size("stats.muzzy") < muzzy, "reuse left stats.muzzy at %zu", ctl_size("stats.muzzy"));
  printf("reuse: %ld pages: faults fresh %ld, reused dirty %ld, reused muzzy %ld\n", pages,
         fresh, dirty_f, muzzy_f);
  CHECKF(dirty_f < pages / 4, "reusing dirty pages took %ld faults for %ld pages", dirty_f,
         pages);
  CHECKF(muzzy_f < pages / 4, "reusing muzzy pages took %ld faults for %ld pages", muzzy_f,
         pages);
  for (int i = 0; i < NBIG; i++) A_FREE(big[i]);
}

static void mode_trim(void) {
  fill();
  for (int i = 0; i < NBIG / 2; i++) A_FREE(big[i]);
  /* muzzy_decay_ms is all of the decay time here: what is freed goes
   * muzzy at the page heap's next look */
  size_t muzzy = 0;
  for (int i = 0; i < 400 && muzzy == 0; i++) {
    sleep_ms(20);
    ctl_refresh();
    muzzy = ctl_size("stats.muzzy");
  }
  CHECKF(muzzy > 0, "nothing went muzzy");
  for (int i = NBIG / 2; i < NBIG; i++) A_FREE(big[i]);
  for (int i = 0; i < NSMALL; i++) A_FREE(small[i]);
  CHECK_CTL("thread.tcache.flush", NULL, NULL, NULL, 0);
  ctl_refresh();
  long rss_freed = rss_kib();
  size_t d = ctl_size("stats.dirty") + ctl_size("stats.muzzy");
  CHECKF(d >= 48 * MIB, "only %zu bytes dirty or muzzy before the trim", d);
  CHECK(A_MALLOC_TRIM(0) == 1);
  ctl_refresh();
  long rss = rss_kib();
  CHECKF(ctl_size("stats.dirty") == 0 && ctl_size("stats.muzzy") == 0,
         "after malloc_trim(0): dirty %zu muzzy %zu", ctl_size("stats.dirty"),
         ctl_size("stats.muzzy"));
  if (RSS_CHECKED)
    CHECKF(rss_freed - rss >= 64 * 1024, "malloc_trim: resident %ld -> %ld KiB", rss_freed, rss);
  printf("trim: dirty + muzzy %zu bytes -> 0; resident %ld -> %ld KiB\n", d, rss_freed, rss);
}

static double mono_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void sleep_until(double t) {
  double now = mono_s();
  if (t > now) sleep_ms((long)((t - now) * 1000) + 1);
}

static void mode_age(void) {
  double d = (double)opt_ssize("opt.dirty_decay_ms") / 1000;
  A_MALLOC_TRIM(0); /* no free pages but ours from here on */
  char *p = A_MALLOC(40 * MIB);
  CHECK(p != NULL);
  memset(p, 0x5a, 40 * MIB);
  double t0 = mono_s();
  CHECK(A_REALLOC(p, 2 * MIB) == p);
  size_t bulk = decaying();
  CHECKF(bulk >= 38 * MIB, "shrinking to 2 MiB freed only %zu bytes", bulk);
  sleep_until(t0 + 0.7 * d);
  CHECK(A_REALLOC(p, MIB) == p);
  size_t merged = decaying();
  CHECKF(merged >= 39 * MIB, "shrinking to 1 MiB: %zu bytes free", merged);
  sleep_until(t0 + d + d / 16 + 0.02);
  size_t left = decaying();
  printf("age: free pages %zu MiB at t0, %zu at 0.7 d, %zu KiB at d + d/16\n", bulk / MIB,
         merged / MIB, left / 1024);
  CHECKF(left < MIB, "%zu bytes still dirty or muzzy %.2f s after the bulk was freed", left,
         mono_s() - t0);
  A_FREE(p);
}

static uint64_t bg_runs(void) {
  uint64_t n = 0;
  size_t len = sizeof n;
  ctl_refresh();
  CHECK_CTL("stats.background_thread.num_runs", &n, &len, NULL, 0);
  return n;
}

static void *park_one(void *arg) {
  (void)arg;
  void *q = A_MALLOC(48); /* a class the main thread's flush parked none of */
  CHECK(q != NULL);
  A_FREE(q);
  return NULL; /* at exit: the class's empty span is parked */
}

static void mode_wake(void) {
  double d = (double)opt_ssize("opt.dirty_decay_ms") / 1000;
  fill();
  release();
  double t0 = mono_s();
  for (int i = 0; i < 100 && bg_threads() == 0; i++) sleep_ms(20);
  CHECKF(bg_threads() == 1, "the decay thread did not start");
  sleep_until(t0 + d / 8); /* past the walk that reaps release()'s parked spans */
  uint64_t r0 = bg_runs();
  double tp = mono_s();
  pthread_t t;
  CHECK(pthread_create(&t, NULL, park_one, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  /* no call into nalloc while waiting: a poll through epoch would run the
   * due decay itself, and the thread would find nothing left to do */
  sleep_until(tp + d * 3 / 16);
  uint64_t r = bg_runs();
  printf("wake: parked at %.2f s, decay walks %llu -> %llu at %.2f s (the freed memory's "
         "muzzy stage at %.2f s)\n",
         tp - t0, (unsigned long long)r0, (unsigned long long)r, mono_s() - t0,
         d - d / 2 - d / 16);
  CHECKF(r > r0, "the decay thread slept through a span parked %.2f s ago", mono_s() - tp);
}

/* ---- many threads and fork ---- */
static _Atomic bool stop;

static void churn(rng_t *r, int rounds) {
  void *live[64] = {0};
  for (int k = 0; k < rounds; k++) {
    int i = (int)rng_range(r, 0, 63);
    A_FREE(live[i]);
    size_t n = rng_range(r, 0, 3) == 0 ? rng_range(r, 64 << 10, 4 << 20) : rng_range(r, 16, 8192);
    CHECK((live[i] = A_MALLOC(n)) != NULL);
    memset(live[i], (int)i, n < 65536 ? n : 65536);
  }
  for (int i = 0; i < 64; i++) A_FREE(live[i]);
}

static void *churner(void *arg) {
  rng_t r;
  rng_seed(&r, (uint64_t)(uintptr_t)arg);
  while (!atomic_load(&stop)) churn(&r, 200);
  return NULL;
}

static void wait_decayed(const char *who) {
  size_t d = decaying();
  for (int i = 0; i < 400 && d > 0; i++) {
    sleep_ms(50);
    d = bg_threads() ? (ctl_refresh(), ctl_size("stats.dirty") + ctl_size("stats.muzzy"))
                     : decaying();
  }
  CHECKF(d == 0, "%s: dirty + muzzy still %zu after 20 s", who, d);
}

static void mode_fork(void) {
  enum { NT = 8 };
  pthread_t t[NT];
  for (long i = 0; i < NT; i++) CHECK(pthread_create(&t[i], NULL, churner, (void *)(i + 1)) == 0);
  for (int k = 0; k < 4; k++) {
    sleep_ms(100);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      rng_t r;
      rng_seed(&r, 1000 + (uint64_t)k);
      churn(&r, 2000);
      fill();
      release();
      CHECKF(bg_threads() == 0, "a fork child started a decay thread");
      wait_decayed("fork child");
      _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child %d: status %#x", k, st);
  }
  atomic_store(&stop, true);
  for (int i = 0; i < NT; i++) CHECK(pthread_join(t[i], NULL) == 0);
  CHECK_CTL("thread.tcache.flush", NULL, NULL, NULL, 0);
  wait_decayed("parent");
  printf("fork: %d threads, 4 children decayed to 0, parent too\n", NT);
}

int main(int argc, char **argv) {
  const char *m = argc > 1 ? argv[1] : "idle";
  if (strcmp(m, "idle") == 0) mode_idle(true);
  else if (strcmp(m, "poll") == 0) mode_idle(false);
  else if (strcmp(m, "reuse") == 0) mode_reuse();
  else if (strcmp(m, "trim") == 0) mode_trim();
  else if (strcmp(m, "age") == 0) mode_age();
  else if (strcmp(m, "wake") == 0) mode_wake();
  else if (strcmp(m, "fork") == 0) mode_fork();
  else CHECKF(false, "unknown mode %s", m);
  return 0;
}
