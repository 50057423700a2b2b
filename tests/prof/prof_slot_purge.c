/* prof_slot_purge.c -- exact mode's sampled-slot arrays go back to the
 * kernel after their spans do, on the same clock as freed user pages
 * (alloc/base.c, page runs), and come back warm when spans are remade
 * sooner.
 *
 * In exact mode (lg_prof_sample:0) every small span holds an array of 8
 * bytes a slot (sample.c), made by the base allocator with the span's
 * first sample and freed with the span. NOBJ objects of 32 and of 64
 * bytes fill ~2 x 128 spans of 1024 slots (8 KiB arrays each: ~2 MiB);
 * freeing them all gives the spans back (beyond the few each class keeps
 * empty). argv[1] says what the configuration (CMakeLists.txt) must show:
 *   now    dirty_decay_ms:0: the arrays go back at once. The kernel's
 *          resident count (/proc/self/statm) and stats.resident must drop
 *          by the same amount (within SLACK), stats.metadata by at least
 *          MIN_DROP: it must not count purged pages.
 *   keep   dirty_decay_ms:-1: nothing goes back, and filling again faults
 *          in (almost) no page: the arrays are reused resident. Purged at
 *          once past 256 KiB instead, the refill faulted 444 pages.
 *   decay  dirty_decay_ms:200 with the background thread: stats.metadata
 *          drops by MIN_DROP within a few seconds of the frees, with no
 *          call into nalloc meanwhile. */
#include "prof_check.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <time.h>

#define NOBJ (128 * 1024)
#define MIN_DROP ((size_t)1 << 20)
#define SLACK ((size_t)768 << 10)

static void *objs[2][NOBJ];

static size_t rss_bytes(void) {
  char buf[256];
  int fd = open("/proc/self/statm", O_RDONLY);
  CHECK(fd >= 0);
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  CHECK(n > 0);
  buf[n] = 0;
  unsigned long size, res;
  CHECK(sscanf(buf, "%lu %lu", &size, &res) == 2);
  return res * (size_t)sysconf(_SC_PAGESIZE);
}

/* A statistic (stats.metadata, stats.resident) of a fresh epoch. */
static size_t stat_now(const char *name) {
  uint64_t e = 1;
  CHECK(nalloc_ctl("epoch", NULL, NULL, &e, sizeof e) == 0);
  size_t v, len = sizeof v;
  CHECK(nalloc_ctl(name, &v, &len, NULL, 0) == 0);
  return v;
}

static size_t metadata(void) { return stat_now("stats.metadata"); }
static size_t resident(void) { return stat_now("stats.resident"); }

static long minflt(void) {
  struct rusage ru;
  CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
  return ru.ru_minflt;
}

NOINL static void fill(void) {
  for (size_t i = 0; i < NOBJ; i++) {
    objs[0][i] = t_malloc(32);
    objs[1][i] = t_malloc(64);
    CHECK(objs[0][i] != NULL && objs[1][i] != NULL);
    memset(objs[0][i], 1, 32);
    memset(objs[1][i], 1, 64);
  }
}

NOINL static void drain(void) {
  for (size_t i = 0; i < NOBJ; i++) {
    t_free(objs[0][i]);
    t_free(objs[1][i]);
  }
}

static void check_now(void) {
  fill();
  size_t m1 = metadata(), r1 = rss_bytes(), s1 = resident();
  drain();
  size_t m2 = metadata(), r2 = rss_bytes(), s2 = resident();
  long dm = (long)m1 - (long)m2, dr = (long)r1 - (long)r2, ds = (long)s1 - (long)s2;
  printf("metadata -%ld KiB, stats.resident -%ld KiB, statm resident -%ld KiB\n", dm >> 10,
         ds >> 10, dr >> 10);
  CHECKF(dm >= (long)MIN_DROP, "stats.metadata dropped by %ld KiB, want >= %zu KiB", dm >> 10,
         MIN_DROP >> 10);
#ifndef __SANITIZE_THREAD__ /* statm counts TSan's shadow of the purged pages too */
  CHECKF(labs(ds - dr) <= (long)SLACK, "stats.resident -%ld KiB against statm -%ld KiB",
         ds >> 10, dr >> 10);
#endif
}

static void check_keep(void) {
  fill();
  size_t m1 = metadata();
  drain();
  size_t m2 = metadata();
  long f0 = minflt();
  fill();
  long faults = minflt() - f0;
  printf("metadata %zu -> %zu KiB after the frees; refill faulted %ld pages\n", m1 >> 10,
         m2 >> 10, faults);
  CHECKF(faults < 64, "refilling faulted %ld pages: freed arrays were not reused resident",
         faults);
  CHECKF(m2 + SLACK >= m1, "stats.metadata dropped %zu -> %zu KiB with dirty_decay_ms:-1",
         m1 >> 10, m2 >> 10);
  drain();
}

static void check_decay(void) {
  fill();
  size_t m1 = metadata();
  drain();
  struct timespec nap = {0, 50 * 1000 * 1000};
  for (int i = 0; i < 200; i++) { /* 10 s at most */
    nanosleep(&nap, NULL);
    size_t m = metadata();
    if (m + MIN_DROP <= m1) {
      printf("metadata %zu -> %zu KiB after %d ms\n", m1 >> 10, m >> 10, (i + 1) * 50);
      return;
    }
  }
  CHECKF(false, "stats.metadata %zu -> %zu KiB 10 s after the frees", m1 >> 10,
         metadata() >> 10);
}

int main(int argc, char **argv) {
  bool prof = false;
  size_t len = sizeof prof;
  if (nalloc_ctl("opt.prof", &prof, &len, NULL, 0) != 0 || !prof) {
    printf("skip: needs NALLOC_CONF=prof:true,lg_prof_sample:0\n");
    return 77;
  }
  const char *mode = argc > 1 ? argv[1] : "now";
  if (strcmp(mode, "now") == 0) check_now();
  else if (strcmp(mode, "keep") == 0) check_keep();
  else if (strcmp(mode, "decay") == 0) check_decay();
  else CHECKF(false, "unknown mode %s", mode);
  printf("ok\n");
  return 0;
}
