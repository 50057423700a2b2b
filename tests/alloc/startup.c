/* startup: what nalloc does in a process that allocates little, run by
 * startup.sh under strace (which checks the system calls) in four modes:
 *   none    no allocation at all: the constructor sets nothing up;
 *   malloc  a few blocks in one thread: no NUMA discovery, no gettid;
 *   thread  a second thread allocates: discovery runs then, and the
 *           thread gets an arena of its own when there are several;
 *   ctl     nalloc_ctl reports the real topology (discovery on demand).
 * Each mode also checks its blocks and figures itself. */
#include "check.h"

static void *second(void *arg) {
  unsigned *arena = arg;
  char *volatile p = A_MALLOC(200);
  CHECK(p != NULL);
  memset(p, 0x5a, 200);
  *arena = ctl_unsigned("thread.arena");
  A_FREE(p);
  return NULL;
}

static void some_blocks(void) {
  static const size_t sizes[] = {1, 24, 100, 1000, 5000, 70000, 200000};
  void *volatile p[sizeof sizes / sizeof *sizes];
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    p[i] = A_MALLOC(sizes[i]);
    CHECK(p[i] != NULL);
    fill_fast(p[i], sizes[i], i);
  }
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    CHECKF(check_fast(p[i], sizes[i], i), "block %zu corrupted", i);
    A_FREE(p[i]);
  }
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "malloc";
  if (strcmp(mode, "none") == 0) return 0;
  some_blocks();
  if (strcmp(mode, "thread") == 0) {
    unsigned arena = ~0u;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, second, &arena) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    unsigned n = ctl_unsigned("arenas.narenas");
    CHECKF(arena < n, "the second thread's arena %u of %u", arena, n);
    /* default configuration: one arena per CPU; the first thread took 0 */
    if (n >= 2) CHECKF(arena != 0, "the second thread shares arena 0 of %u", n);
  } else if (strcmp(mode, "ctl") == 0) {
    unsigned nodes = ctl_unsigned("numa.nodes"), n = ctl_unsigned("arenas.narenas");
    CHECKF(nodes >= 1 && n >= nodes, "numa.nodes %u, arenas.narenas %u", nodes, n);
    CHECK(ctl_unsigned("numa.narenas_per_node") * nodes >= n);
  }
  some_blocks();
  return 0;
}
