/* pagefault: what a fresh page costs on this machine, touched one at a
 * time (a fault each) or faulted in by one madvise(MADV_POPULATE_WRITE)
 * or mmap(MAP_POPULATE) call for the whole run. nalloc's os_populate
 * rests on the difference (alloc/os.c). Not an allocator workload: run it
 * directly, `bench-pagefault [PAGES] [ROUNDS]`; prints the median over
 * ROUNDS of microseconds per page for each way. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static char *fresh(size_t size, int extra) {
  char *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | extra, -1, 0);
  if (p == MAP_FAILED) {
    perror("pagefault: mmap");
    exit(1);
  }
  return p;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  size_t pages = argc > 1 ? strtoul(argv[1], NULL, 10) : 4096;
  int rounds = argc > 2 ? atoi(argv[2]) : 7;
  if (pages == 0 || rounds <= 0 || rounds > 1000) {
    fprintf(stderr, "usage: bench-pagefault [PAGES>0] [ROUNDS 1..1000]\n");
    return 2;
  }
  size_t size = pages * 4096;
  double *t[3];
  for (int k = 0; k < 3; k++) t[k] = calloc((size_t)rounds, sizeof(double));
  for (int r = 0; r < rounds; r++) {
    char *p = fresh(size, 0);
    double t0 = now();
    for (size_t i = 0; i < size; i += 4096) p[i] = 1;
    t[0][r] = now() - t0;
    munmap(p, size);

    p = fresh(size, 0);
    t0 = now();
    if (madvise(p, size, MADV_POPULATE_WRITE) != 0) {
      perror("pagefault: madvise(MADV_POPULATE_WRITE)");
      return 1;
    }
    for (size_t i = 0; i < size; i += 4096) p[i] = 1;
    t[1][r] = now() - t0;
    munmap(p, size);

    t0 = now();
    p = fresh(size, MAP_POPULATE);
    for (size_t i = 0; i < size; i += 4096) p[i] = 1;
    t[2][r] = now() - t0;
    munmap(p, size);
  }
  const char *name[3] = {"touch", "madvise_populate", "map_populate"};
  for (int k = 0; k < 3; k++) {
    qsort(t[k], (size_t)rounds, sizeof(double), cmp);
    printf("%-17s %.2f us/page (median of %d rounds, %zu pages)\n", name[k],
           t[k][rounds / 2] * 1e6 / (double)pages, rounds, pages);
  }
  return 0;
}
