/* migrate.c -- the program behind the README's NUMA and temporary
 * allocation examples (issue 14): four workers each fill a cache on their
 * own node's arena, then are all moved to node 3's arena (thread.arena,
 * as a scheduler that migrates threads would leave them) and serve: each
 * request formats a reply that is freed at once (a temporary allocation)
 * and opens a session freed later.
 *   cc -g -O0 -fno-omit-frame-pointer -I include tools/demo/migrate.c \
 *      -o migrate -L build -lnalloc -Wl,-rpath,$PWD/build -lpthread
 *   NALLOC_CONF=prof:true,lg_prof_sample:0,numa_nodes:4,narenas_per_node:1 \
 *      ./migrate out.heap            (a second argument: the workers wait
 *                                     4 s before exiting, for prof_http) */
#include <nalloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *cache[4][12000];
static int serve;

__attribute__((noinline)) char *format_reply(void) {
  char *s = malloc(256);
  if (s) memset(s, 'x', 255), s[255] = 0;
  return s;
}
__attribute__((noinline)) void send_reply(void) {
  char *r = format_reply(); /* freed before anything else is allocated */
  __asm__ volatile("" : : "r"(r) : "memory");
  free(r);
}
__attribute__((noinline)) void cache_put(int w, int i) { cache[w][i] = malloc(512); }
__attribute__((noinline)) void *session_new(void) { return malloc(1024); }

static void *worker(void *arg) {
  int w = (int)(long)arg;
  unsigned a = (unsigned)w;
  nalloc_ctl("thread.arena", NULL, NULL, &a, sizeof a);
  for (int i = 0; i < 10000; i++) cache_put(w, i);
  a = 3; /* every worker moved to node 3 */
  nalloc_ctl("thread.arena", NULL, NULL, &a, sizeof a);
  static __thread void *keep[2000];
  for (int i = 0; i < 2000; i++) {
    send_reply();
    keep[i] = session_new();
    cache_put(w, 10000 + i);
  }
  for (int i = 0; i < 2000; i++) free(keep[i]);
  if (serve) sleep(4); /* still running while a profile is fetched */
  return NULL;
}

int main(int argc, char **argv) {
  serve = argc > 2;
  pthread_t t[4];
  for (long w = 0; w < 4; w++) pthread_create(&t[w], NULL, worker, (void *)w);
  for (int w = 0; w < 4; w++) pthread_join(t[w], NULL);
  const char *f = argc > 1 ? argv[1] : "migrate.heap";
  return nalloc_ctl("prof.dump", NULL, NULL, &f, sizeof f) != 0;
}
