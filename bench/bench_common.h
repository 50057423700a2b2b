/* bench_common.h -- helpers shared by the nalloc bench workloads.
 *
 * Every workload takes the same options:
 *   -t THREADS   worker threads (default 1)
 *   -s SCALE     multiplies the default amount of work (default 1.0; the
 *                runner's quick mode uses ~0.01, slow profilers ~0.02)
 *   -S SEED      random seed (default 1)
 * and prints exactly one machine-readable line on stdout:
 *   RESULT name=<w> threads=<t> scale=<s> ops=<n> seconds=<x> ns_per_op=<y>
 *          hwm_kb=<peak RSS, VmHWM> check=ok [key=value ...]
 * Data written into every block is checked before it is freed; a mismatch
 * prints "CHECK FAILED" on stderr and exits with status 3, so a broken
 * allocator fails loudly instead of producing a fast number.
 *
 * The workloads never link against an allocator: the runner chooses one
 * with LD_PRELOAD. */
#ifndef NALLOC_BENCH_COMMON_H
#define NALLOC_BENCH_COMMON_H

#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

struct bench_args {
  int threads;
  double scale;
  uint64_t seed;
  long iters; /* -n, used by the fast-path micro-benchmark */
  long size;  /* -z, used by the fast-path micro-benchmark */
};

static inline void bench_usage(const char *name) {
  fprintf(stderr,
          "usage: %s [-t threads] [-s scale] [-S seed] [-n iters] [-z size]\n",
          name);
  exit(2);
}

static inline struct bench_args bench_parse(int argc, char **argv) {
  struct bench_args a = {1, 1.0, 1, 0, 0};
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    if (o[0] != '-' || !o[1] || o[2] || i + 1 >= argc) bench_usage(argv[0]);
    const char *v = argv[++i];
    char *end = NULL;
    switch (o[1]) {
      case 't': a.threads = (int)strtol(v, &end, 10); break;
      case 's': a.scale = strtod(v, &end); break;
      case 'S': a.seed = strtoull(v, &end, 10); break;
      case 'n': a.iters = strtol(v, &end, 10); break;
      case 'z': a.size = strtol(v, &end, 10); break;
      default: bench_usage(argv[0]);
    }
    if (!end || *end) bench_usage(argv[0]);
  }
  if (a.threads < 1 || a.threads > 4096 || !(a.scale > 0)) bench_usage(argv[0]);
  return a;
}

static inline double bench_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Scaled count, never below lo. */
static inline long bench_scaled(double base, double scale, long lo) {
  double v = base * scale;
  return v < (double)lo ? lo : (long)v;
}

#define BENCH_FAIL(...)                                 \
  do {                                                  \
    fflush(stdout);                                     \
    fprintf(stderr, "CHECK FAILED %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                       \
    fprintf(stderr, "\n");                              \
    _exit(3);                                           \
  } while (0)

#define BENCH_OOM(p)                                                    \
  do {                                                                  \
    if (!(p)) BENCH_FAIL("allocation failed (NULL) at %s", #p);         \
  } while (0)

/* splitmix64: small, fast, good enough for picking sizes and slots. */
struct bench_rng { uint64_t s; };
static inline uint64_t bench_rand(struct bench_rng *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static inline struct bench_rng bench_rng_init(uint64_t seed, uint64_t stream) {
  struct bench_rng r = {seed * 0x2545F4914F6CDD1Dull + stream * 0x9E3779B97F4A7C15ull + 1};
  bench_rand(&r);
  return r;
}
/* Uniform in [lo, hi]. */
static inline size_t bench_uniform(struct bench_rng *r, size_t lo, size_t hi) {
  return lo + (size_t)(bench_rand(r) % (uint64_t)(hi - lo + 1));
}
/* Log-uniform in [lo, hi] (as many 8-16 B blocks as 32-64 KiB ones). */
static inline size_t bench_loguniform(struct bench_rng *r, size_t lo, size_t hi) {
  int lg_lo = 63 - __builtin_clzll(lo), lg_hi = 63 - __builtin_clzll(hi);
  int e = lg_lo + (int)(bench_rand(r) % (uint64_t)(lg_hi - lg_lo + 1));
  size_t base = (size_t)1 << e;
  size_t s = base + (size_t)(bench_rand(r) % base);
  if (s < lo) s = lo;
  if (s > hi) s = hi;
  return s;
}

/* Stamp a block with a value derived from (tag, size) in its first 8
 * bytes, middle and last byte; bench_check verifies it. Two live blocks
 * that overlap, or a block whose contents were clobbered by the allocator,
 * fail the check. */
static inline uint64_t bench_mix(uint64_t tag, size_t n) {
  uint64_t v = (tag + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)n << 17);
  return v ^ (v >> 29);
}
static inline void bench_stamp(void *p, size_t n, uint64_t tag) {
  unsigned char *c = (unsigned char *)p;
  uint64_t v = bench_mix(tag, n);
  if (n >= 8) {
    memcpy(c, &v, 8);
    if (n >= 24) memcpy(c + ((n / 2) & ~(size_t)7), &v, 8);
  } else {
    for (size_t i = 0; i < n; i++) c[i] = (unsigned char)(v >> (8 * i));
  }
  if (n > 8) c[n - 1] = (unsigned char)((v >> 56) ^ 0x5a);
}
static inline int bench_check(const void *p, size_t n, uint64_t tag) {
  const unsigned char *c = (const unsigned char *)p;
  uint64_t v = bench_mix(tag, n), w;
  if (n >= 8) {
    memcpy(&w, c, 8);
    if (w != v) return 0;
    if (n >= 24) {
      memcpy(&w, c + ((n / 2) & ~(size_t)7), 8);
      if (w != v) return 0;
    }
  } else {
    for (size_t i = 0; i < n; i++)
      if (c[i] != (unsigned char)(v >> (8 * i))) return 0;
  }
  if (n > 8 && c[n - 1] != (unsigned char)((v >> 56) ^ 0x5a)) return 0;
  return 1;
}

/* Resident set size of this process in KiB (from /proc/self/statm). */
static inline long bench_rss_kb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, res = 0;
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &size, &res) != 2) res = -1;
  fclose(f);
  return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Keep the compiler from proving a block unused (and deleting the
 * malloc/free pair). */
static inline void bench_escape(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

/* Peak resident set size of this process in KiB (VmHWM). Unlike the
 * ru_maxrss that wait4 reports to the parent, it does not include the
 * parent's memory image from before exec. */
static inline long bench_hwm_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  if (!f) return -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "VmHWM:", 6)) {
      kb = strtol(line + 6, NULL, 10);
      break;
    }
  fclose(f);
  return kb;
}

static inline void bench_result(const char *name, const struct bench_args *a,
                                double ops, double secs, const char *extra) {
  long hwm = bench_hwm_kb();
  printf("RESULT name=%s threads=%d scale=%g ops=%.0f seconds=%.6f ns_per_op=%.2f hwm_kb=%ld check=ok%s%s\n",
         name, a->threads, a->scale, ops, secs, ops > 0 ? secs * 1e9 / ops : 0.0, hwm,
         extra && *extra ? " " : "", extra ? extra : "");
  fflush(stdout);
}

/* Starts fn((void *)t) on n threads, t = 0..n-1, the worker's index. */
static inline pthread_t *bench_start(long n, void *(*fn)(void *)) {
  pthread_t *th = (pthread_t *)malloc(sizeof *th * (size_t)n);
  BENCH_OOM(th);
  for (long t = 0; t < n; t++)
    if (pthread_create(&th[t], NULL, fn, (void *)t)) BENCH_FAIL("pthread_create");
  return th;
}

/* Joins (and frees) what bench_start started. */
static inline void bench_join(pthread_t *th, long n) {
  for (long t = 0; t < n; t++) pthread_join(th[t], NULL);
  free(th);
}

#ifdef __cplusplus
}
#endif
#endif
