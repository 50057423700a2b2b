/* prefix_demo.c -- a program whose own functions have names that start
 * like allocator functions (tc_, je_, nalloc_), for the nalloc-prof test
 * that allocator frames are recognised by module and exact entry-point
 * name, never by prefix. Run under an allocator with a heap profiler it
 * asks for one dump (argv[1]) holding exactly:
 *   main -> tc_parse_config -> app_leaf -> malloc   2048 B
 *   main -> je_worker -> malloc                     4096 B
 *   main -> nalloc_helper -> malloc                 8192 B
 *   main -> api_user -> je_malloc -> malloc          512 B
 * je_malloc here is this program's own wrapper, but its name is a known
 * allocator entry point (jemalloc's prefixed malloc), so it is dropped and
 * api_user is charged, as for an allocator linked statically. Sizes are
 * size classes of nalloc, jemalloc and tcmalloc alike. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

static void *keep[8];
static int nkeep;

NOINLINE void *app_leaf(size_t n) { return malloc(n); }
NOINLINE void tc_parse_config(void) { keep[nkeep++] = app_leaf(2048); }
NOINLINE void je_worker(void) { keep[nkeep++] = malloc(4096); }
NOINLINE void nalloc_helper(void) { keep[nkeep++] = malloc(8192); }
NOINLINE void *je_malloc(size_t n) { return malloc(n); }
NOINLINE void api_user(void) { keep[nkeep++] = je_malloc(512); }

typedef int (*ctl_fn)(const char *, void *, size_t *, void *, size_t);
typedef void (*gperf_dump_fn)(const char *);

int main(int argc, char **argv) {
  tc_parse_config();
  je_worker();
  nalloc_helper();
  api_user();
  if (argc < 2) return 0;
  ctl_fn ctl = (ctl_fn)dlsym(RTLD_DEFAULT, "nalloc_ctl");
  if (!ctl) ctl = (ctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
  if (ctl) {
    const char *path = argv[1];
    int r = ctl("prof.dump", NULL, NULL, &path, sizeof path);
    if (r) fprintf(stderr, "prefix_demo: prof.dump failed: %d\n", r);
    return r ? 3 : 0;
  }
  gperf_dump_fn hd = (gperf_dump_fn)dlsym(RTLD_DEFAULT, "HeapProfilerDump");
  if (hd) { /* HEAPPROFILE=<prefix> names the file */
    hd("prefix_demo");
    return 0;
  }
  fprintf(stderr, "prefix_demo: no heap profiler loaded\n");
  return 3;
}
