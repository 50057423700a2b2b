/* prof_own.c -- the profile holds the program's allocations and nothing
 * else (issue 13 item 3). The driver runs this program again as a child
 * that allocates 2, 2, 2, 2 and 3 bytes and exits, in exact mode with a
 * final dump, with both of nalloc's helper threads running (prof_signal's
 * dump thread and background_thread's purge thread, whose TLS glibc
 * allocates in the creating thread under nalloc's constructor), and checks
 * that the dump is exactly `5: 11` in records whose every frame is the
 * program's own calls, nothing else.
 *
 * The child allocates nothing before that (no stdio), and its exit
 * allocates nothing before the dump (the dump's atexit handler is
 * registered first, so it runs last).
 *
 * While nalloc links libnuma, whose constructor allocates (numa_init,
 * numa_bitmask_alloc), those records are reported and the test is skipped
 * (77) if, and only if, everything else is exact: the lead is replacing
 * libnuma with raw system calls, after which any extra record fails.
 *
 * In a sanitizer build the runtime loads libstdc++, whose constructor
 * allocates its exception pool (72,704 bytes): a start-up allocation of a
 * library the program loads (as a C++ program's own libstdc++ would be),
 * not nalloc's, so it is reported and allowed there
 * (PROF_OWN_SANITIZER). */
#include "prof_check.h"

#include <sys/stat.h>
#include <sys/wait.h>

static void *keep[5];

NOINL void own_alloc(void) {
  static const size_t sz[5] = {2, 2, 2, 2, 3};
  for (int i = 0; i < 5; i++) keep[i] = t_malloc(sz[i]);
  __asm__ volatile("" ::: "memory");
}

/* Is return address a, in the child that wrote `heap`, in a file whose
 * path contains `part`? (Its mappings are the dump's trailer: the
 * libraries are elsewhere in this process.) */
static bool in_object(const char *heap, uintptr_t a, const char *part) {
  FILE *f = fopen(heap, "r");
  CHECK(f);
  char line[4096];
  bool maps = false, hit = false;
  while (!hit && fgets(line, sizeof line, f)) {
    if (!maps) {
      maps = strncmp(line, "MAPPED_LIBRARIES:", 17) == 0;
      continue;
    }
    uintptr_t lo, hi;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2 && a > lo &&
        a <= hi)
      hit = strstr(line, part) != NULL;
  }
  fclose(f);
  return hit;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "child") == 0) {
    own_alloc();
    return 0;
  }
  char dir[] = "/tmp/prof_own.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char conf[512];
  snprintf(conf, sizeof conf,
           "prof:true,lg_prof_sample:0,prof_final:true,prof_prefix:%s/own,"
           "prof_signal:USR2,background_thread:true,dirty_decay_ms:1000",
           dir);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    setenv("NALLOC_CONF", conf, 1);
    execl("/proc/self/exe", argv[0], "child", (char *)NULL);
    _exit(121);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  char path[600];
  snprintf(path, sizeof path, "%s/own.%d.0.f.heap", dir, (int)pid);
  pc_prof_t P = pc_load(path);
  pc_rebase(&P, path);
  CHECK_EQ_U(P.rate, 1); /* heapprofile: exact */
  uint64_t n = 0, b = 0, numa_n = 0, numa_b = 0, other_n = 0, other_b = 0;
  bool bad = false;
  for (int i = 0; i < P.nrec; i++) {
    const pc_rec_t *r = &P.rec[i];
    bool numa = false, cxx = false, own = strcmp(pc_fn(r->f[0]), "own_alloc") == 0;
    for (int k = 0; k < r->nf; k++) {
      numa |= in_object(path, r->f[k], "libnuma");
      cxx |= in_object(path, r->f[k], "libstdc++");
    }
#ifndef PROF_OWN_SANITIZER
    cxx = false;
#endif
    printf("%" PRIu64 ": %" PRIu64 " [%" PRIu64 ": %" PRIu64 "] at %s%s\n",
           r->n, r->b, r->an, r->ab, pc_fn(r->f[0]),
           numa ? " (libnuma)" : cxx ? " (libstdc++, loaded by the sanitizer runtime)"
           : own ? "" : " (NOT THE PROGRAM'S)");
    if (own) {
      n += r->n, b += r->b;
    } else if (numa) {
      numa_n += r->n, numa_b += r->b;
    } else if (cxx) {
      other_n += r->n, other_b += r->b;
    } else {
      bad = true;
    }
  }
  CHECK(!bad);
  CHECK_EQ_U(n, 5);
  CHECK_EQ_U(b, 11);
  pc_free(&P);
  unlink(path);
  rmdir(dir);
  if (numa_n || numa_b) {
    CHECK(P.n == 5 + numa_n + other_n && P.b == 11 + numa_b + other_b);
    printf("SKIP: the program's own allocations are exactly 5: 11, but libnuma's "
           "constructor added %" PRIu64 ": %" PRIu64 " (nalloc still links "
           "libnuma)\n", numa_n, numa_b);
    return 77;
  }
  CHECK_EQ_U(P.n, 5 + other_n);
  CHECK_EQ_U(P.b, 11 + other_b);
  printf("prof_own: ok\n");
  return 0;
}
