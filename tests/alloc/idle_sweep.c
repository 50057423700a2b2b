/* idle_sweep.c -- the free pages of an idle thread's spans go back to the
 * OS without any call from that thread (the decay thread's look at idle
 * heaps, heap_idle_sweep), and nothing live is lost while the owner comes
 * and goes under it (issue 12: "a process that frees most of its memory and
 * goes quiet gets its RSS back within dirty_decay_ms").
 *
 *   idle_sweep [rss|exited|race]
 *
 * rss   (dirty_decay_ms:400) One thread allocates 48 MiB of 16 B-1 KiB
 *       blocks, writes them, frees 90% at random and then makes no call
 *       into nalloc: it sleeps, reading its resident set with raw system
 *       calls. The truth is the pages that still hold a live byte (the
 *       pages of every live block, from malloc_usable_size): within
 *       dirty_decay_ms plus a margin the resident set must come down to
 *       the start's plus those pages plus SLACK_KIB (the current span of
 *       each class, which the look leaves alone, the test's arrays,
 *       metadata). Before this change it stayed at the start's + ~48 MiB
 *       (only the owner purged such pages, in its own slow paths), about
 *       20 MiB over the bound. Then every live block is checked byte for
 *       byte. (Under a sanitizer, whose shadow pages are resident too,
 *       only the contents.)
 * exited  The same, but the blocks come from a thread that exits before
 *       the wait: its spans, live blocks and all, are its arena's
 *       abandoned ones, which nobody adopts while the process is quiet.
 * race  (dirty_decay_ms:20: a look every 10 ms) Three threads allocate,
 *       write, check and free blocks of 16 B-2 KiB, hand some to each
 *       other to free (remote frees), and pause 0-25 ms at random, so the
 *       decay thread finds their heaps idle and purges while they come
 *       back and free into the same spans on their fast paths. A page
 *       purged under a live block, or a slot handed out twice, shows up as
 *       a block whose contents changed. The looks must have purged
 *       something (stats.npurged grows). Under ThreadSanitizer too. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdatomic.h>
#include <time.h>

#include "check.h"

#define SLACK_KIB 6144

/* The resident set in KiB from /proc/self/statm, without any allocation
 * (fopen would call malloc and end the thread's idleness). */
static long raw_rss_kib(void) {
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  CHECK(fd >= 0);
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  CHECK(n > 0);
  buf[n] = 0;
  char *sp = strchr(buf, ' ');
  CHECK(sp != NULL);
  return strtol(sp + 1, NULL, 10) * (sysconf(_SC_PAGESIZE) / 1024);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

typedef struct {
  unsigned char *p;
  uint32_t n;
  uint32_t tag;
} blk_t;

static int cmp_page(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* ---- rss ---------------------------------------------------------------- */

#define RSS_BYTES ((size_t)48 << 20)
#define RSS_NMAX (RSS_BYTES / 16)

/* What the allocating thread leaves for the check: its live blocks, the
 * model's bound and the pages array (freed last). */
static struct {
  long rss0, bound, arrays_kib;
  blk_t *b;
  size_t nlive, live_pages;
  uintptr_t *pages;
} R;

/* Allocates 48 MiB, frees nine in ten at random, and computes the bound. */
static void *rss_alloc(void *unused) {
  (void)unused;
  blk_t *b = A_MALLOC(RSS_NMAX * sizeof *b);
  CHECK(b != NULL);
  rng_t r;
  rng_seed(&r, 7);
  size_t n = 0, bytes = 0;
  while (bytes < RSS_BYTES && n < RSS_NMAX) {
    uint32_t sz = (uint32_t)rng_range(&r, 16, 1024);
    b[n].p = A_MALLOC(sz);
    CHECK(b[n].p != NULL);
    b[n].n = sz;
    b[n].tag = (uint32_t)n;
    fill_fast(b[n].p, sz, n);
    bytes += sz;
    n++;
  }
  /* keep one in ten, chosen at random, spread over every span */
  size_t nlive = 0;
  for (size_t i = 0; i < n; i++) {
    if (rng_range(&r, 0, 9) == 0) {
      b[nlive++] = b[i];
      continue;
    }
    A_FREE(b[i].p);
  }
  /* the model: every page a live block's usable bytes touch */
  size_t npages = 0, cap = nlive * 2 + 16;
  uintptr_t *pages = A_MALLOC(cap * sizeof *pages);
  CHECK(pages != NULL);
  for (size_t i = 0; i < nlive; i++) {
    uintptr_t lo = (uintptr_t)b[i].p, hi = lo + A_USABLE(b[i].p);
    for (uintptr_t pg = lo / 4096; pg <= (hi - 1) / 4096; pg++) {
      if (npages == cap) {
        cap *= 2;
        pages = A_REALLOC(pages, cap * sizeof *pages);
        CHECK(pages != NULL);
      }
      pages[npages++] = pg;
    }
  }
  qsort(pages, npages, sizeof *pages, cmp_page);
  size_t live_pages = 0;
  for (size_t i = 0; i < npages; i++) live_pages += i == 0 || pages[i] != pages[i - 1];
  R.b = b;
  R.nlive = nlive;
  R.pages = pages;
  R.live_pages = live_pages;
  R.arrays_kib = (long)((n * sizeof *b + npages * sizeof *pages) / 1024); /* written */
  R.bound = R.rss0 + (long)live_pages * 4 + R.arrays_kib + SLACK_KIB;
  return NULL;
}

/* `exited`: the blocks come from a thread that exits before the wait, so
 * its spans are its arena's abandoned ones; else from this thread, which
 * then goes idle. */
static void mode_rss(bool exited) {
  R.rss0 = raw_rss_kib();
  if (exited) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, rss_alloc, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
  } else {
    rss_alloc(NULL);
  }
  long rss1 = raw_rss_kib();
  printf("rss%s: start %ld KiB, after the frees %ld, %zu live blocks on %zu pages; bound %ld\n",
         exited ? " (thread exited)" : "", R.rss0, rss1, R.nlive, R.live_pages, R.bound);
  fflush(stdout);
  /* no call into nalloc from here until the resident set is down: the
   * look needs a heap (an arena's abandoned spans) unchanged for a whole
   * half period */
  long rss = rss1;
  int waited = 0, limit = CHECK_ASAN || CHECK_TSAN ? 1000 : 4000;
  for (; waited < limit && rss > R.bound; waited += 50) {
    sleep_ms(50);
    rss = raw_rss_kib();
  }
  printf("rss: %ld KiB after %d ms idle\n", rss, waited);
  bool check_rss = !CHECK_ASAN && !CHECK_TSAN; /* a sanitizer's shadow is resident too */
  CHECKF(!check_rss || rss <= R.bound,
         "free pages of %s spans stayed resident: %ld KiB after %d ms, bound %ld "
         "(start %ld + %zu live pages + %ld arrays + %d slack)",
         exited ? "an exited thread's" : "an idle thread's", rss, waited, R.bound, R.rss0,
         R.live_pages, R.arrays_kib, SLACK_KIB);
  for (size_t i = 0; i < R.nlive; i++) {
    const blk_t *b = &R.b[i];
    CHECKF(check_fast(b->p, b->n, b->tag), "live block %u (%u B at %p) lost its contents",
           b->tag, b->n, (void *)b->p);
    A_FREE(b->p);
  }
  A_FREE(R.pages);
  A_FREE(R.b);
}

/* ---- race --------------------------------------------------------------- */

#define RACE_THREADS 3
#define RACE_LIVE 4096
#define RACE_HAND 256 /* blocks a thread hands to the next one per round */

typedef struct {
  _Atomic(blk_t *) inbox; /* blocks handed over by the previous thread */
  unsigned id;
  unsigned long rounds, checked;
} racer_t;

static racer_t racers[RACE_THREADS];
static _Atomic bool race_stop;

static void check_blk(const blk_t *b, const char *what) {
  CHECKF(check_fast(b->p, b->n, b->tag), "%s block %u (%u B at %p) lost its contents", what,
         b->tag, b->n, (void *)b->p);
}

static void race_fill(blk_t *b, rng_t *r, uint32_t tag) {
  b->n = (uint32_t)rng_range(r, 16, 2048);
  b->p = A_MALLOC(b->n);
  CHECK(b->p != NULL);
  b->tag = tag;
  fill_fast(b->p, b->n, tag);
}

static void *racer_main(void *arg) {
  racer_t *me = arg;
  racer_t *next = &racers[(me->id + 1) % RACE_THREADS];
  rng_t r;
  rng_seed(&r, 100 + me->id);
  blk_t *live = A_MALLOC(RACE_LIVE * sizeof *live);
  CHECK(live != NULL);
  uint32_t tag = me->id << 28;
  for (size_t i = 0; i < RACE_LIVE; i++) race_fill(&live[i], &r, tag++);
  while (!atomic_load(&race_stop)) {
    /* free most blocks at random, in place; new ones refill the holes
     * (so spans other than the current ones get frees while idle) */
    for (size_t i = 0; i < RACE_LIVE; i++) {
      if (rng_range(&r, 0, 9) < 7) continue;
      check_blk(&live[i], "own");
      A_FREE(live[i].p);
      live[i].p = NULL;
    }
    /* the blocks the previous thread handed over: free them (remote) */
    blk_t *in = atomic_exchange(&me->inbox, NULL);
    if (in != NULL) {
      for (size_t i = 0; i < RACE_HAND; i++) {
        check_blk(&in[i], "handed");
        A_FREE(in[i].p);
      }
      A_FREE(in);
    }
    /* pause without calling nalloc: the heap goes idle, and the decay
     * thread may be looking at it when this thread comes back */
    sleep_ms((long)rng_range(&r, 0, 25));
    for (size_t i = 0; i < RACE_LIVE; i++)
      if (live[i].p == NULL) race_fill(&live[i], &r, ((tag++ & 0x0fffffffu) | (me->id << 28)));
    /* hand some to the next thread, unless it has not taken the last */
    if (atomic_load(&next->inbox) == NULL) {
      blk_t *out = A_MALLOC(RACE_HAND * sizeof *out);
      CHECK(out != NULL);
      for (size_t i = 0; i < RACE_HAND; i++) race_fill(&out[i], &r, ((tag++ & 0x0fffffffu) | (me->id << 28)));
      blk_t *expect = NULL;
      if (!atomic_compare_exchange_strong(&next->inbox, &expect, out)) {
        for (size_t i = 0; i < RACE_HAND; i++) A_FREE(out[i].p);
        A_FREE(out);
      }
    }
    for (size_t i = 0; i < RACE_LIVE; i++) check_blk(&live[i], "own");
    me->checked += RACE_LIVE;
    me->rounds++;
  }
  for (size_t i = 0; i < RACE_LIVE; i++) {
    check_blk(&live[i], "own");
    A_FREE(live[i].p);
  }
  A_FREE(live);
  return NULL;
}

static void mode_race(void) {
  ctl_refresh();
  uint64_t purged0 = 0;
  size_t len = sizeof purged0;
  CHECK(nalloc_ctl("stats.npurged", &purged0, &len, NULL, 0) == 0);
  pthread_t t[RACE_THREADS];
  for (unsigned i = 0; i < RACE_THREADS; i++) {
    racers[i].id = i;
    CHECK(pthread_create(&t[i], NULL, racer_main, &racers[i]) == 0);
  }
  sleep_ms(CHECK_TSAN || CHECK_ASAN ? 2000 : 3000);
  atomic_store(&race_stop, true);
  unsigned long rounds = 0;
  for (unsigned i = 0; i < RACE_THREADS; i++) {
    CHECK(pthread_join(t[i], NULL) == 0);
    rounds += racers[i].rounds;
    blk_t *in = atomic_exchange(&racers[i].inbox, NULL);
    if (in != NULL) {
      for (size_t k = 0; k < RACE_HAND; k++) {
        check_blk(&in[k], "handed");
        A_FREE(in[k].p);
      }
      A_FREE(in);
    }
  }
  ctl_refresh();
  uint64_t purged1 = 0;
  CHECK(nalloc_ctl("stats.npurged", &purged1, &len, NULL, 0) == 0);
  printf("race: %lu rounds, %llu pages purged\n", rounds,
         (unsigned long long)(purged1 - purged0));
  CHECKF(rounds >= RACE_THREADS, "only %lu rounds", rounds);
  CHECKF(purged1 > purged0, "the decay thread purged nothing in %lu rounds of idle heaps", rounds);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "rss";
  if (strcmp(mode, "rss") == 0) mode_rss(false);
  else if (strcmp(mode, "exited") == 0) mode_rss(true);
  else if (strcmp(mode, "race") == 0) mode_race();
  else CHECKF(0, "unknown mode %s", mode);
  return 0;
}
