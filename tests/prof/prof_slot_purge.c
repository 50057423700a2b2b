/* prof_slot_purge.c -- exact mode's sampled-slot arrays go back to the
 * kernel when their spans do (alloc/base.c, page runs).
 *
 * In exact mode (lg_prof_sample:0) every small span holds an array of 8
 * bytes a slot (sample.c), made by the base allocator with the span's
 * first sample and freed with the span. NOBJ objects of 32 and of 64
 * bytes fill ~2 x 128 spans of 1024 slots (8 KiB arrays each: ~2 MiB);
 * freeing them all gives the spans back (beyond the few each class keeps
 * empty). Without decay (dirty_decay_ms:-1, background_thread:false) the
 * user pages stay resident, so what the process gives back is the base
 * allocator's: the kernel's resident count (/proc/self/statm) must drop by
 * at least MIN_DROP, and so must stats.metadata, which must not count the
 * purged pages (the two drops within SLACK of each other). Before, freed
 * arrays stayed resident on the base allocator's free lists: neither
 * figure moved. */
#include "prof_check.h"

#include <fcntl.h>

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

static size_t metadata(void) {
  uint64_t e = 1;
  CHECK(nalloc_ctl("epoch", NULL, NULL, &e, sizeof e) == 0);
  size_t m, len = sizeof m;
  CHECK(nalloc_ctl("stats.metadata", &m, &len, NULL, 0) == 0);
  return m;
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

int main(void) {
  bool prof = false;
  size_t len = sizeof prof;
  if (nalloc_ctl("opt.prof", &prof, &len, NULL, 0) != 0 || !prof) {
    printf("skip: needs NALLOC_CONF=prof:true,lg_prof_sample:0\n");
    return 77;
  }
  fill();
  size_t m1 = metadata(), r1 = rss_bytes();
  for (size_t i = 0; i < NOBJ; i++) {
    t_free(objs[0][i]);
    t_free(objs[1][i]);
  }
  size_t m2 = metadata(), r2 = rss_bytes();
  long dm = (long)m1 - (long)m2, dr = (long)r1 - (long)r2;
  printf("metadata %zu -> %zu KiB (-%ld), resident %zu -> %zu KiB (-%ld)\n", m1 >> 10,
         m2 >> 10, dm >> 10, r1 >> 10, r2 >> 10, dr >> 10);
  CHECKF(dr >= (long)MIN_DROP, "resident dropped by %ld KiB, want >= %zu KiB", dr >> 10,
         MIN_DROP >> 10);
  CHECKF(dm >= (long)MIN_DROP, "stats.metadata dropped by %ld KiB, want >= %zu KiB", dm >> 10,
         MIN_DROP >> 10);
  CHECKF(labs(dm - dr) <= (long)SLACK, "metadata -%ld KiB against resident -%ld KiB", dm >> 10,
         dr >> 10);
  printf("ok\n");
  return 0;
}
