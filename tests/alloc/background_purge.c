/* background_purge: with background_thread:true (and a short
 * dirty_decay_ms, set by CMake), memory freed by a program that then stops
 * allocating goes back to the OS without any further call into nalloc:
 * stats.dirty falls to 0 and the resident set shrinks. Polls for up to 20 s
 * (the thread wakes every ~25 ms here), so a slow machine only waits
 * longer. */
#include <stdbool.h>
#include <time.h>

#include "check.h"

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, res = 0;
  CHECK(f != NULL && fscanf(f, "%ld %ld", &size, &res) == 2);
  fclose(f);
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(void) {
  enum { N = 64, SZ = 1 << 20 };
  void *p[N];
  bool on = false;
  size_t len = sizeof on;
  CHECK_CTL("opt.background_thread", &on, &len, NULL, 0);
  CHECKF(on, "run with NALLOC_CONF=background_thread:true");
  for (int i = 0; i < N; i++) {
    p[i] = A_MALLOC(SZ);
    CHECK(p[i] != NULL);
    memset(p[i], 0x5a, SZ); /* resident */
  }
  for (int i = 0; i < N; i++) A_FREE(p[i]);
  ctl_refresh();
  size_t dirty = ctl_size("stats.dirty");
  long rss_freed = rss_kib();
  CHECKF(dirty >= (size_t)N * SZ / 2, "freed pages were purged at once (dirty %zu)", dirty);
  /* no allocation from here on: only the background thread can purge */
  struct timespec tick = {0, 50 * 1000 * 1000};
  for (int i = 0; i < 400 && dirty > 0; i++) {
    nanosleep(&tick, NULL);
    ctl_refresh();
    dirty = ctl_size("stats.dirty");
  }
  long rss_idle = rss_kib();
  CHECKF(dirty == 0, "stats.dirty still %zu after 20 s idle", dirty);
  CHECKF(rss_freed - rss_idle >= (long)N * SZ / 1024 / 2,
         "resident set went only from %ld to %ld KiB", rss_freed, rss_idle);
  printf("background_purge: dirty 0, resident %ld -> %ld KiB while idle\n", rss_freed,
         rss_idle);
  return 0;
}
