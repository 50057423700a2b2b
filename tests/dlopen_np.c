/* dlopen_np.c -- nalloc loaded with dlopen after start-up: its
 * initial-exec TLS must fit the static TLS surplus, and the prefixed API
 * must work from several threads, including threads that existed before
 * the library was loaded. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);
typedef size_t (*usable_fn)(void *);
static malloc_fn nm;
static free_fn nf;
static usable_fn nu;
static pthread_barrier_t loaded;

static int work(void) {
  void *v[1000];
  for (int r = 0; r < 20; r++) {
    for (int i = 0; i < 1000; i++) {
      size_t n = (size_t)(i * 37 % 5000) + 1;
      if ((v[i] = nm(n)) == NULL || nu(v[i]) < n) return 1;
      memset(v[i], i & 0xff, n);
    }
    for (int i = 0; i < 1000; i++) {
      if (((unsigned char *)v[i])[0] != (i & 0xff)) return 1;
      nf(v[i]);
    }
  }
  return 0;
}

static void *early_thread(void *arg) {
  (void)arg;
  pthread_barrier_wait(&loaded); /* started before dlopen, runs after */
  return (void *)(long)work();
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: dlopen_np path/to/libnalloc_np.so\n");
    return 2;
  }
  pthread_barrier_init(&loaded, NULL, 2);
  pthread_t early;
  pthread_create(&early, NULL, early_thread, NULL);
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "dlopen failed: %s\n", dlerror());
    return 1;
  }
  nm = (malloc_fn)dlsym(h, "nalloc_malloc");
  nf = (free_fn)dlsym(h, "nalloc_free");
  nu = (usable_fn)dlsym(h, "nalloc_malloc_usable_size");
  if (!nm || !nf || !nu) {
    fprintf(stderr, "missing symbols\n");
    return 1;
  }
  pthread_barrier_wait(&loaded);
  int bad = work();
  pthread_t late;
  pthread_create(&late, NULL, early_thread, NULL);
  pthread_barrier_wait(&loaded);
  void *r1, *r2;
  pthread_join(early, &r1);
  pthread_join(late, &r2);
  if (bad || r1 || r2) {
    fprintf(stderr, "allocation through the dlopen'ed library failed\n");
    return 1;
  }
  puts("dlopen ok");
  return 0;
}
