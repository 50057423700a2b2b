/* prof_stress.c -- dumps while three threads allocate and free hard (some
 * objects freed by another thread) and a fourth thread forks: no deadlock
 * (alarm() fails the test if anything hangs), every dump is well formed
 * (prof_check.h validates each line), every forked child can allocate and
 * dump, object contents survive, and once everything is freed each worker
 * stack is back to exactly 0 live objects and bytes. */
#include "prof_check.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#define NW 3
#define SLOTS 512
static _Atomic bool stop;
static _Atomic(void *) exchange[64];

typedef struct {
  int id;
  void *slot[SLOTS];
  size_t size[SLOTS];
} worker_t;

NOINL void *stress_alloc_a(size_t n) { void *p = t_malloc(n); __asm__ volatile(""); return p; }
NOINL void *stress_alloc_b(size_t n) { void *p = t_calloc(1, n); __asm__ volatile(""); return p; }
NOINL void *stress_realloc(void *p, size_t n) { p = t_realloc(p, n); __asm__ volatile(""); return p; }

static void fill(void *p, size_t n, unsigned char v) { memset(p, v, n); }
static void verify(void *p, size_t n, unsigned char v) {
  unsigned char *c = p;
  for (size_t i = 0; i < n; i++) CHECK(c[i] == v);
}

static void *worker(void *arg) {
  worker_t *w = arg;
  uint64_t x = 88172645463325252ull ^ (uint64_t)w->id;
  unsigned long iters = 0;
  while (!atomic_load(&stop) || iters < 20000) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    unsigned i = (unsigned)(x % SLOTS);
    size_t n = (size_t)((x >> 20) % 3000) + 1;
    unsigned char tag = (unsigned char)(w->id * 16 + (i & 15));
    if (w->slot[i]) {
      verify(w->slot[i], w->size[i] < 64 ? w->size[i] : 64, tag);
      if ((x >> 40) % 4 == 0) {
        w->slot[i] = stress_realloc(w->slot[i], n);
        CHECK(w->slot[i]);
        w->size[i] = n;
        fill(w->slot[i], n < 64 ? n : 64, tag);
        continue;
      }
      /* Hand some objects to whoever takes the exchange slot next. */
      void *old = atomic_exchange(&exchange[(x >> 33) % 64], w->slot[i]);
      if (old) t_free(old);
      w->slot[i] = NULL;
    } else {
      w->slot[i] = (x >> 50) & 1 ? stress_alloc_a(n) : stress_alloc_b(n);
      CHECK(w->slot[i]);
      w->size[i] = n;
      fill(w->slot[i], n < 64 ? n : 64, tag);
    }
    iters++;
  }
  for (unsigned i = 0; i < SLOTS; i++) t_free(w->slot[i]);
  return NULL;
}

static void *forker(void *arg) {
  (void)arg;
  for (int k = 0; k < 12; k++) {
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      alarm(60); /* not inherited: a child that hangs must fail too, or it
                    keeps ctest waiting on its output after the parent died */
      void *p = stress_alloc_a(100);
      char path[256];
      snprintf(path, sizeof path, "prof_stress.child.%d.heap", (int)getpid());
      int rc = ctl_dump(path);
      t_free(p);
      if (rc == 0) {
#ifdef __SANITIZE_ADDRESS__
        /* ASan's own malloc (stdio's buffers) may be locked by a parent
         * thread that was inside it at fork: GCC 12's ASan has no fork
         * handler. Read the dump with plain system calls instead. */
        char head[32] = {0};
        int fd = open(path, O_RDONLY);
        CHECK(fd >= 0 && read(fd, head, sizeof head - 1) > 0);
        close(fd);
        CHECK(strncmp(head, "heap profile:", 13) == 0);
#else
        pc_prof_t P = pc_load(path);
        pc_free(&P);
#endif
        unlink(path);
      }
      _exit(rc == 0 ? 0 : 3);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    usleep(1000);
  }
  return NULL;
}

int main(void) {
  alarm(100); /* a deadlock fails the test instead of hanging ctest */
  static worker_t w[NW];
  pthread_t t[NW], tf;
  for (int i = 0; i < NW; i++) {
    w[i].id = i;
    CHECK(pthread_create(&t[i], NULL, worker, &w[i]) == 0);
  }
  CHECK(pthread_create(&tf, NULL, forker, NULL) == 0);
  char path[256];
  snprintf(path, sizeof path, "prof_stress.%d.heap", (int)getpid());
  for (int d = 0; d < 25; d++) {
    CHECK(ctl_dump(path) == 0);
    pc_prof_t P = pc_load(path);
    pc_free(&P);
  }
  CHECK(pthread_join(tf, NULL) == 0);
  atomic_store(&stop, true);
  for (int i = 0; i < NW; i++) CHECK(pthread_join(t[i], NULL) == 0);
  for (int i = 0; i < 64; i++) t_free(atomic_exchange(&exchange[i], NULL));

  CHECK(ctl_dump(path) == 0);
  pc_prof_t P = pc_load(path);
  const char *fns[] = {"stress_alloc_a", "stress_alloc_b", "stress_realloc"};
  for (int i = 0; i < 3; i++) {
    pc_sum_t s = pc_sum(&P, fns[i], NULL);
    CHECK(s.an > 0);
    CHECK_EQ_U(s.n, 0);
    CHECK_EQ_U(s.b, 0);
  }
  pc_free(&P);
  unlink(path);
  printf("prof_stress: ok\n");
  return 0;
}
