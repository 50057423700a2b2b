/* thread_handover.c -- blocks across many short-lived threads, checked
 * against a model of what is live (issue 11: an exiting thread's spans go
 * to its arena's abandoned lists, with blocks of theirs still out in
 * other threads, and the next threads adopt them).
 *
 * Waves of 1, 2, 5 and 24 threads. Each
 * thread frees about half of the blocks the previous wave's thread of its
 * index left, allocates new ones (sizes across the small classes), and
 * leaves some; some go to a freer thread that frees them while their
 * allocating thread exits (remote frees racing with the exit). Every
 * block is filled with its tag and checked whole when freed (a block
 * handed to two owners is clobbered by one of them), and every address
 * a malloc returns must not be live in the model (a hash set). After each
 * wave stats.allocated must equal its start plus the usable sizes of the
 * blocks the model holds: a block lost (a slot never freed) or counted
 * twice moves it by at least 16 bytes. A fork child then runs waves of
 * its own from the model it inherited. (Written on branch thr9, where
 * exiting threads' heaps were kept for the next ones; it checks the same
 * invariants of the exit path as it is.) */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define KEEP 96                /* blocks a thread leaves for its successor */
#define MAXT 24                /* threads in the widest wave */
#define HASH (1u << 16)        /* live-address set, > MAXT * KEEP + ring */
#define RING 4096              /* blocks handed to the freer thread */
#ifndef ARRAY_LEN
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#endif

typedef struct {
  unsigned char *p;
  size_t size;
  uint64_t tag;
} blk_t;

static blk_t left[MAXT][KEEP];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *live_set[HASH];
static size_t model_bytes; /* usable bytes of the live blocks (mu) */
static blk_t ring[RING];
static unsigned ring_head, ring_tail; /* mu */
static _Atomic bool freer_stop;
static _Atomic uint64_t next_tag = 1;

static unsigned slot_of(void *p) {
  return (unsigned)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull >> 48) & (HASH - 1);
}

/* Under mu. */
static void live_add(void *p, size_t usable) {
  unsigned i = slot_of(p);
  while (live_set[i] != NULL) {
    CHECKF(live_set[i] != p, "malloc returned %p, which is live (double-owned)", p);
    i = (i + 1) & (HASH - 1);
  }
  live_set[i] = p;
  model_bytes += usable;
}

/* Under mu: removes p, backward-shift deletion. */
static void live_del(void *p, size_t usable) {
  unsigned i = slot_of(p);
  while (live_set[i] != p) {
    CHECKF(live_set[i] != NULL, "freeing %p, which the model does not hold", p);
    i = (i + 1) & (HASH - 1);
  }
  for (unsigned j = (i + 1) & (HASH - 1); live_set[j] != NULL; j = (j + 1) & (HASH - 1)) {
    unsigned k = slot_of(live_set[j]);
    /* j's entry may move to the hole at i unless its home lies in (i, j] */
    if ((j > i && (k <= i || k > j)) || (j < i && k <= i && k > j)) {
      live_set[i] = live_set[j];
      i = j;
    }
  }
  live_set[i] = NULL;
  model_bytes -= usable;
}

static blk_t blk_new(rng_t *r) {
  static const size_t edges[] = {16, 128, 512, 2048, 8192, 65536};
  unsigned e = (unsigned)rng_range(r, 0, 4);
  size_t size = rng_range(r, edges[e], edges[e + 1]);
  blk_t b = {A_MALLOC(size), size, atomic_fetch_add(&next_tag, 1)};
  CHECK(b.p != NULL);
  for (size_t i = 0; i < size; i++) b.p[i] = (unsigned char)(b.tag * 131 + i);
  pthread_mutex_lock(&mu);
  live_add(b.p, A_USABLE(b.p));
  pthread_mutex_unlock(&mu);
  return b;
}

static void blk_free(blk_t b) {
  for (size_t i = 0; i < b.size; i++)
    CHECKF(b.p[i] == (unsigned char)(b.tag * 131 + i),
           "block %p (tag %llu, %zu B) clobbered at byte %zu: owned twice", (void *)b.p,
           (unsigned long long)b.tag, b.size, i);
  pthread_mutex_lock(&mu);
  live_del(b.p, A_USABLE(b.p));
  pthread_mutex_unlock(&mu);
  A_FREE(b.p);
}

static bool ring_put(blk_t b) {
  pthread_mutex_lock(&mu);
  bool ok = ring_head - ring_tail < RING;
  if (ok) ring[ring_head++ % RING] = b;
  pthread_mutex_unlock(&mu);
  return ok;
}

static bool ring_get(blk_t *b) {
  pthread_mutex_lock(&mu);
  bool ok = ring_head != ring_tail;
  if (ok) *b = ring[ring_tail++ % RING];
  pthread_mutex_unlock(&mu);
  return ok;
}

static void *freer(void *arg) {
  (void)arg;
  blk_t b;
  while (!atomic_load(&freer_stop))
    if (ring_get(&b)) blk_free(b);
    else sched_yield();
  while (ring_get(&b)) blk_free(b);
  return NULL;
}

typedef struct {
  int index;
  uint64_t seed;
} job_t;

static void *worker(void *arg) {
  job_t *j = arg;
  rng_t r;
  rng_seed(&r, j->seed);
  blk_t *mine = left[j->index];
  for (int i = 0; i < KEEP; i++)
    if (mine[i].p != NULL && rng_next(&r) % 2) {
      blk_free(mine[i]);
      mine[i].p = NULL;
    }
  blk_t tmp[64];
  for (int round = 0; round < 4; round++) {
    for (int i = 0; i < 64; i++) tmp[i] = blk_new(&r);
    for (int i = 0; i < 64; i++) {
      unsigned k = (unsigned)(rng_next(&r) % KEEP);
      if (i % 4 == 0 && mine[k].p == NULL) mine[k] = tmp[i];
      else if (i % 4 == 1 && ring_put(tmp[i])) {
      } else blk_free(tmp[i]);
    }
  }
  return NULL;
}

static size_t allocated0;

static void check_model(const char *when) {
  size_t now = stat_allocated();
  pthread_mutex_lock(&mu);
  size_t want = allocated0 + model_bytes;
  pthread_mutex_unlock(&mu);
  CHECKF(now == want, "%s: stats.allocated %zu, the model holds %zu (+%zu at start): %+lld B",
         when, now, want - allocated0, allocated0, (long long)now - (long long)want);
}

static void waves(uint64_t seed, int rounds) {
  static const int widths[] = {1, 2, 5, MAXT, 1, 3};
  pthread_t fr;
  atomic_store(&freer_stop, false);
  CHECK(pthread_create(&fr, NULL, freer, NULL) == 0);
  uint64_t n = 0;
  for (int w = 0; w < rounds; w++) {
    int width = widths[w % ARRAY_LEN(widths)];
    pthread_t th[MAXT];
    job_t jobs[MAXT];
    for (int t = 0; t < width; t++) {
      jobs[t] = (job_t){t, seed * 1000003u + n++};
      CHECK(pthread_create(&th[t], NULL, worker, &jobs[t]) == 0);
    }
    for (int t = 0; t < width; t++) CHECK(pthread_join(th[t], NULL) == 0);
  }
  atomic_store(&freer_stop, true);
  CHECK(pthread_join(fr, NULL) == 0);
}

static void free_all(void) {
  for (int t = 0; t < MAXT; t++)
    for (int i = 0; i < KEEP; i++)
      if (left[t][i].p != NULL) {
        blk_free(left[t][i]);
        left[t][i].p = NULL;
      }
}

int main(void) {
  int rounds = CHECK_TSAN ? 24 : 120;
  /* glibc's own allocations for its first threads (1440 B here) count in
   * the baseline: one wave first, every block of it freed */
  waves(99, 6);
  free_all();
  allocated0 = 0;
  allocated0 = stat_allocated() - model_bytes;
  for (int pass = 0; pass < 3; pass++) {
    waves((uint64_t)pass + 1, rounds);
    check_model("after the waves");
  }
  /* everything free given back, then the heaps remade */
  A_MALLOC_TRIM(0);
  waves(7, rounds / 2);
  check_model("after a trim");
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) { /* the parent's other threads' heaps are gone here */
    /* glibc frees records of the parent's threads as the child makes
     * its first ones (288 B here): the child's baseline after a wave of
     * each width, below the parent's */
    /* (TSan cannot start threads after a fork of a threaded process) */
    if (!CHECK_TSAN) waves(98, 6);
    size_t base = stat_allocated() - model_bytes;
    CHECKF(base <= allocated0 && base + 1024 >= allocated0,
           "fork child: stats.allocated %zu B off the model (parent: %zu)", base, allocated0);
    allocated0 = base;
    if (!CHECK_TSAN) waves(9, rounds / 4);
    check_model("fork child, after the waves");
    free_all();
    check_model("fork child, all freed");
    _exit(0);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child failed (status %d)", st);
  free_all();
  check_model("all freed");
  CHECK(model_bytes == 0);
  printf("thread_handover: ok (%s)\n", A_MODE);
  return 0;
}
