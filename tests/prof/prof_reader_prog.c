/* prof_reader_prog.c -- writes the profiles that readers.sh hands to
 * google-pprof, jeprof and go tool pprof:
 *   exact FILE    (lg_prof_sample:0, prof_active:false) the 2,2,2,2,3-byte
 *                 example: b holds 7 bytes, a 4, total 5 objects / 11 B
 *   sampled FILE  b holds 40 MiB in 1000-byte objects, a 20 MiB
 *   threads FILE  (prof_format:jemalloc) a thread named "worker" allocates
 *                 in worker_alloc 100 x 1000 B, main in b 50 x 1000 B
 *   views FILE    (numa_nodes:4) on each of four arenas, b keeps 2000 x
 *                 1000 B and c allocates 400 x 4096 B freed at once: the
 *                 dump has '#nalloc node' lines, and '#nalloc temporary'
 *                 (exact) or '#nalloc lifetime' (lg_prof_sample >= 16)
 *                 lines, which readers.sh shows the readers ignore */
#include "prof_check.h"

#include <pthread.h>

static void *sink[200000];
static int ns;
NOINL void b(size_t n) { sink[ns++] = t_malloc(n); __asm__ volatile(""); }
NOINL void a(size_t n) { sink[ns++] = t_malloc(n); b(n); __asm__ volatile(""); }
NOINL void c(size_t n) { t_free(t_malloc(n)); __asm__ volatile(""); }
NOINL void worker_alloc(void) {
  for (int i = 0; i < 100; i++) sink[100000 + i] = t_malloc(1000);
  __asm__ volatile("");
}
static void *worker(void *arg) {
  (void)arg;
  const char *name = "worker";
  CHECK(nalloc_ctl("thread.prof.name", NULL, NULL, &name, sizeof name) == 0);
  worker_alloc();
  return NULL;
}

int main(int argc, char **argv) {
  if (argc == 1) { /* as a ctest of its own: the exact workload, checked */
    char path[64];
    snprintf(path, sizeof path, "reader_prog.%d.heap", (int)getpid());
    char *args[] = {argv[0], "exact", path, NULL};
    CHECK(main(3, args) == 0);
    pc_prof_t P = pc_load(path);
    CHECK_EQ_U(P.n, 5);
    CHECK_EQ_U(P.b, 11);
    CHECK_EQ_U(pc_sum(&P, "b", NULL).b, 7);
    CHECK_EQ_U(pc_sum(&P, "a", NULL).b, 4);
    pc_free(&P);
    unlink(path);
    return 0;
  }
  CHECK(argc == 3);
  if (!strcmp(argv[1], "exact")) {
    ctl_bool("prof.active", true);
    for (int i = 0; i < 2; i++) a(2);
    b(3);
    ctl_bool("prof.active", false);
  } else if (!strcmp(argv[1], "sampled")) {
    for (int i = 0; i < 20480; i++) a(1000); /* a: 20 MiB, b via a: 20 MiB */
    for (int i = 0; i < 20480; i++) b(1000); /* b: +20 MiB */
  } else if (!strcmp(argv[1], "threads")) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    for (int i = 0; i < 50; i++) b(1000);
  } else if (!strcmp(argv[1], "views")) {
    for (unsigned ar = 0; ar < 4; ar++) {
      CHECK(nalloc_ctl("thread.arena", NULL, NULL, &ar, sizeof ar) == 0);
      /* 8 MB live in all: ~120 live samples at lg_prof_sample:16. With
       * 0.8 MB (200 a arena) the dump held ~9 (3-21 over 100 runs), so
       * about one run in 8,000 held none, and a dump without samples gets
       * no report from jeprof: what an ASan CI run of readers.sh failed
       * with once ("sampled inuse_space: no report"). */
      for (int i = 0; i < 2000; i++) b(1000);
      for (int i = 0; i < 400; i++) c(4096);
    }
  } else {
    return 2;
  }
  CHECK(ctl_dump(argv[2]) == 0);
  return 0;
}
