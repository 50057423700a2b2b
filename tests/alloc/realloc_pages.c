/* realloc_pages.c -- blocks grown by realloc to a page or more live in page
 * runs of their own (alloc/realloc.c) that grow and shrink in place.
 *
 *   inplace   a buffer grown by 1-512 B at a time to 64 KiB keeps its
 *             contents at every step; shrunk to 8 KiB it stays where it
 *             is (the pages after it go back to the page heap), and grown
 *             back a page at a time with nothing allocated in between it
 *             never moves: the pages after it are the free ones it gave
 *             back. The usable size is the request rounded up to pages.
 *             Shrunk below a page it moves to a size class, contents kept.
 *   model     256 buffers grown in turn, each against a copy the test
 *             keeps (the model): every byte of a buffer matches it when
 *             the buffer is freed, and the usable size never falls short
 *             of the request.
 *
 * Run also under exact profiling (every request sampled), where a block
 * that grows in place takes its record along instead of moving. */
#include <stdbool.h>
#include <sys/mman.h>

#include "check.h"

#define KIB ((size_t)1 << 10)
#define PAGE_SZ ((size_t)4096)

static rng_t rng = {7};
static uint64_t rnd(void) { return rng_next(&rng); }

static unsigned char pat(size_t i, unsigned seed) {
  return (unsigned char)(i * 131 + seed);
}

static void check_bytes(const unsigned char *p, size_t n, unsigned seed) {
  for (size_t j = 0; j < n; j++)
    CHECKF(p[j] == pat(j, seed), "byte %zu of %zu B: %u, expected %u", j, n, p[j],
           pat(j, seed));
}

static void run_inplace(void) {
  unsigned char *p = NULL;
  size_t len = 0;
  while (len < 64 * KIB) {
    size_t n = len + 1 + rnd() % 512;
    unsigned char *q = realloc_checked(p, n);
    if (len > 0)
      CHECKF(q[0] == pat(0, 1) && q[len - 1] == pat(len - 1, 1),
             "realloc %zu -> %zu B lost the contents", len, n);
    for (size_t j = len; j < n; j++) q[j] = pat(j, 1);
    p = q;
    len = n;
  }
  check_bytes(p, len, 1);
  /* shrink in place: the block keeps its address and its first 8 KiB */
  unsigned char *q = A_REALLOC(p, 8 * KIB);
  CHECKF(q == p, "shrinking a grown block of %zu B to 8 KiB moved it", len);
  CHECK_EQ_U(A_USABLE(q), 8 * KIB);
  check_bytes(q, 8 * KIB, 1);
  /* grow back a page at a time into the pages it gave back */
  for (size_t n = 8 * KIB + 100; n <= 64 * KIB; n += PAGE_SZ) {
    q = A_REALLOC(p, n);
    CHECKF(q == p, "growing %zu B into the free pages after it moved it", n);
    CHECK_EQ_U(A_USABLE(q), (n + PAGE_SZ - 1) / PAGE_SZ * PAGE_SZ);
    memset(q + n - 100, 0x5a, 100);
  }
  check_bytes(p, 8 * KIB, 1);
  /* below a page: a slot of a size class, the contents kept */
  q = A_REALLOC(p, 1000);
  CHECK(q != NULL);
  CHECKF(A_USABLE(q) >= 1000 && A_USABLE(q) < PAGE_SZ,
         "a block shrunk to 1000 B kept %zu usable", A_USABLE(q));
  check_bytes(q, 1000, 1);
  A_FREE(q);
}

#define NBUF 256
#define NOPS 400000
#define MODEL_BYTES (96 * KIB + 512)

/* The models live in pages of their own, outside the allocator. */
static unsigned char *model_new(void) {
  void *m = mmap(NULL, MODEL_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(m != MAP_FAILED);
  return m;
}

static void run_model(void) {
  static unsigned char *p[NBUF], *model[NBUF];
  static size_t len[NBUF], target[NBUF];
  static unsigned gen[NBUF];
  for (int b = 0; b < NBUF; b++) {
    target[b] = 1 + rnd() % (96 * KIB);
    model[b] = model_new();
  }
  for (long i = 0; i < NOPS; i++) {
    int b = (int)(i % NBUF);
    size_t old = len[b], n = old + 1 + rnd() % 512;
    unsigned char *q = realloc_checked(p[b], n);
    for (size_t j = old; j < n; j++) q[j] = model[b][j] = (unsigned char)rnd();
    p[b] = q;
    len[b] = n;
    if (n >= target[b]) {
      CHECKF(memcmp(q, model[b], n) == 0, "buffer %d (%zu B, generation %u) differs "
             "from its model", b, n, gen[b]);
      A_FREE(q);
      p[b] = NULL;
      len[b] = 0;
      gen[b]++;
      target[b] = 1 + rnd() % (96 * KIB);
    }
  }
  for (int b = 0; b < NBUF; b++) {
    CHECK(p[b] == NULL || memcmp(p[b], model[b], len[b]) == 0);
    A_FREE(p[b]);
    munmap(model[b], MODEL_BYTES);
  }
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "all";
  bool all = strcmp(mode, "all") == 0;
  if (all || strcmp(mode, "inplace") == 0) run_inplace();
  if (all || strcmp(mode, "model") == 0) run_model();
  printf("realloc_pages %s: ok (%s)\n", mode, A_MODE);
  return 0;
}
