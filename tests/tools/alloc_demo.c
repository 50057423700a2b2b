/* alloc_demo.c -- a program whose allocations are known exactly, for the
 * nalloc-prof tests. Run under an allocator with a heap profiler (nalloc,
 * jemalloc or gperftools) it asks for a dump after each phase:
 *
 *   phase 1: build_list -> make_node   100 x 64 B   (malloc)
 *            load_table                  1 x 4096 B (calloc)
 *            fill_cache -> grow_buffer   4 x 1024 B (grow_buffer is inlined)
 *            lib_alloc (libnpdemo.so)    3 x 512 B  (a shared library)
 *   dump 1 (argv[1])
 *   phase 2: load_table's block is freed (-4096 B)
 *            leak_more                   8 x 2048 B
 *   dump 2 (argv[2], optional)
 *
 * Sizes are size classes in nalloc, jemalloc and tcmalloc, so usable and
 * requested sizes agree. The dump is requested through whichever control
 * call the preloaded allocator exports (found with dlsym, so the program
 * links against none of them). The "@name" comments mark the lines the
 * tests expect in --lines output. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

void *lib_alloc(size_t n);

static void *keep[256];
static int nkeep;
static void *table;

NOINLINE void *make_node(size_t n) {
  return malloc(n); /* @make_node */
}

NOINLINE void build_list(int n) {
  for (int i = 0; i < n; i++) keep[nkeep++] = make_node(64);
}

NOINLINE void load_table(void) {
  table = calloc(16, 256); /* @load_table */
}

static inline __attribute__((always_inline)) void *grow_buffer(size_t n) {
  return malloc(n); /* @grow_buffer */
}

NOINLINE void fill_cache(void) {
  for (int i = 0; i < 4; i++) keep[nkeep++] = grow_buffer(1024); /* @fill_cache */
}

NOINLINE void leak_more(void) {
  for (int i = 0; i < 8; i++) keep[nkeep++] = malloc(2048); /* @leak_more */
}

typedef int (*ctl_fn)(const char *, void *, size_t *, void *, size_t);
typedef void (*gperf_dump_fn)(const char *);

/* Returns 0 if a dump was written. */
static int dump(const char *path) {
  ctl_fn ctl = (ctl_fn)dlsym(RTLD_DEFAULT, "nalloc_ctl");
  if (!ctl) ctl = (ctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
  if (ctl) {
    int r = ctl("prof.dump", NULL, NULL, &path, sizeof path);
    if (r) fprintf(stderr, "alloc_demo: prof.dump failed: %d\n", r);
    return r;
  }
  /* gperftools: HEAPPROFILE=<prefix> names the files itself. */
  gperf_dump_fn hd = (gperf_dump_fn)dlsym(RTLD_DEFAULT, "HeapProfilerDump");
  if (hd) {
    hd("alloc_demo");
    return 0;
  }
  fprintf(stderr, "alloc_demo: no heap profiler loaded\n");
  return 3;
}

int main(int argc, char **argv) {
  build_list(100);
  load_table();
  fill_cache();
  for (int i = 0; i < 3; i++) keep[nkeep++] = lib_alloc(512);
  if (argc > 1 && dump(argv[1])) return 3;
  free(table);
  leak_more();
  if (argc > 2 && dump(argv[2])) return 3;
  return 0;
}
