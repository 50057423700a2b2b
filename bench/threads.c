/* threads: thread churn. Waves of `threads` short-lived threads; each
 * allocates 256 blocks (16-2048 B), frees 3/4 of them, and leaves 1/4 in
 * its slot for the thread that takes the slot in the next wave, which
 * checks and frees them (frees of memory whose allocating thread has
 * exited). Total work = 3*10^4 threads * scale; ops counts threads. */
#include <pthread.h>
#include "bench_common.h"

#define PER 256
#define KEEP (PER / 4)
struct slot {
  unsigned char *p[KEEP];
  size_t sz[KEEP];
  uint64_t tag[KEEP];
  long index;
  uint64_t seed;
};

static void *worker(void *arg) {
  struct slot *s = arg;
  for (int i = 0; i < KEEP; i++)
    if (s->p[i]) {
      if (!bench_check(s->p[i], s->sz[i], s->tag[i])) BENCH_FAIL("threads: inherited block clobbered");
      free(s->p[i]);
    }
  struct bench_rng r = bench_rng_init(s->seed, (uint64_t)s->index);
  unsigned char *p[PER];
  size_t sz[PER];
  for (int i = 0; i < PER; i++) {
    sz[i] = bench_uniform(&r, 16, 2048);
    p[i] = malloc(sz[i]);
    BENCH_OOM(p[i]);
    bench_stamp(p[i], sz[i], ((uint64_t)s->index << 16) | (uint64_t)i);
  }
  for (int i = 0; i < PER; i++) {
    if (!bench_check(p[i], sz[i], ((uint64_t)s->index << 16) | (uint64_t)i))
      BENCH_FAIL("threads: block clobbered");
    if (i % 4 == 0) {
      s->p[i / 4] = p[i];
      s->sz[i / 4] = sz[i];
      s->tag[i / 4] = ((uint64_t)s->index << 16) | (uint64_t)i;
    } else {
      free(p[i]);
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  struct bench_args a = bench_parse(argc, argv);
  long total = bench_scaled(3e4, a.scale, 2L * a.threads);
  long waves = (total + a.threads - 1) / a.threads;
  struct slot *s = calloc((size_t)a.threads, sizeof *s);
  pthread_t *th = malloc(sizeof *th * (size_t)a.threads);
  BENCH_OOM(s);
  BENCH_OOM(th);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  double t0 = bench_now();
  long n = 0;
  for (long w = 0; w < waves; w++) {
    for (int t = 0; t < a.threads; t++) {
      s[t].index = n + t;
      s[t].seed = a.seed;
      if (pthread_create(&th[t], &attr, worker, &s[t])) BENCH_FAIL("pthread_create");
    }
    for (int t = 0; t < a.threads; t++) pthread_join(th[t], NULL);
    n += a.threads;
  }
  for (int t = 0; t < a.threads; t++)
    for (int i = 0; i < KEEP; i++)
      if (s[t].p[i]) {
        if (!bench_check(s[t].p[i], s[t].sz[i], s[t].tag[i])) BENCH_FAIL("threads: leftover block clobbered");
        free(s[t].p[i]);
      }
  double secs = bench_now() - t0;
  free(s);
  free(th);
  bench_result("threads", &a, (double)n, secs, "");
  return 0;
}
