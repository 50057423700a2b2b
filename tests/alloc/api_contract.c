/* api_contract: the glibc contract of every malloc-family entry point.
 *
 * The same checks run through a table of function pointers, once for the
 * glibc names (override build: they must be nalloc's) and once for the
 * nalloc_-prefixed names (both builds). The override build also checks
 * that every public name, the glibc-internal __libc_* names included,
 * resolves to libnalloc, and that mallinfo/mallinfo2/malloc_stats report
 * nalloc's heap. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#ifndef NALLOC_TEST_PREFIXED
#include <malloc.h>
/* C23 / glibc 2.39 names, not in the 2.36 headers: weak so that a missing
 * export is a test failure rather than a link failure. */
extern void free_sized(void *, size_t) __attribute__((weak));
extern void free_aligned_sized(void *, size_t, size_t) __attribute__((weak));
#endif

#define PAGE_SZ ((size_t)4096)

typedef struct {
  const char *name;
  void *(*malloc)(size_t);
  void (*free)(void *);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  void *(*reallocarray)(void *, size_t, size_t);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*aligned_alloc)(size_t, size_t);
  void *(*memalign)(size_t, size_t);
  void *(*valloc)(size_t);
  void *(*pvalloc)(size_t);
  size_t (*usable)(void *);
  void (*free_sized)(void *, size_t);
  void (*free_aligned_sized)(void *, size_t, size_t);
  int (*malloc_trim)(size_t);
} api_t;

static const api_t *T;  /* the table under test */

#define CK(cond)                                                         \
  do {                                                                   \
    if (!(cond))                                                         \
      check_fail(__FILE__, __LINE__, "[%s] %s", T->name, #cond);        \
  } while (0)
#define CKF(cond, fmt, ...)                                              \
  do {                                                                   \
    if (!(cond))                                                         \
      check_fail(__FILE__, __LINE__, "[%s] " fmt, T->name, __VA_ARGS__); \
  } while (0)

static bool aligned(const void *p, size_t a) {
  return ((uintptr_t)p & (a - 1)) == 0;
}

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* ---------------------------------------------------------------------- */
static void test_zero_sizes(void) {
  enum { N = 1000 };
  static void *v[N];
  for (int i = 0; i < N; i++) {
    v[i] = T->malloc(0);
    CKF(v[i] != NULL, "malloc(0) #%d returned NULL", i);
    CK(aligned(v[i], 16));
  }
  qsort(v, N, sizeof v[0], cmp_ptr);
  for (int i = 1; i < N; i++)
    CKF(v[i] != v[i - 1], "malloc(0) returned %p twice", v[i]);
  for (int i = 0; i < N; i++) T->free(v[i]);

  void *p = T->realloc(NULL, 0);
  CK(p != NULL);
  T->free(p);
  p = T->calloc(0, 0);
  CK(p != NULL);
  T->free(p);
  p = T->calloc(0, 100);
  CK(p != NULL);
  T->free(p);
  p = T->calloc(100, 0);
  CK(p != NULL);
  T->free(p);
  p = T->reallocarray(NULL, 0, 0);
  CK(p != NULL);
  T->free(p);
  p = T->memalign(64, 0);
  CK(p != NULL && aligned(p, 64));
  T->free(p);
  p = T->aligned_alloc(64, 0);
  CK(p != NULL && aligned(p, 64));
  T->free(p);
  p = (void *)1;
  CK(T->posix_memalign(&p, 64, 0) == 0);
  CK(p == NULL || aligned(p, 64));
  T->free(p);
  p = T->valloc(0);
  CK(p != NULL && aligned(p, PAGE_SZ));
  T->free(p);
  p = T->pvalloc(0);
  CK(p != NULL && aligned(p, PAGE_SZ));
  CKF(T->usable(p) >= PAGE_SZ, "usable(pvalloc(0)) = %zu", T->usable(p));
  memset(p, 0x5a, PAGE_SZ);
  T->free(p);

  T->free(NULL);
  CK(T->usable(NULL) == 0);
  if (T->free_sized) T->free_sized(NULL, 0);
  if (T->free_aligned_sized) T->free_aligned_sized(NULL, 64, 0);
}

/* ---------------------------------------------------------------------- */
static const size_t huge_sizes[] = {
    SIZE_MAX,
    SIZE_MAX - 1,
    SIZE_MAX - 15,
    SIZE_MAX - 16,
    SIZE_MAX - 64,
    SIZE_MAX - 4095,
    SIZE_MAX - 4096,
    SIZE_MAX - 65536,
    SIZE_MAX - ((size_t)2 << 20),
    SIZE_MAX - ((size_t)1 << 30),
    SIZE_MAX / 2 + 1,
    SIZE_MAX / 2,
    PTRDIFF_MAX,
    (size_t)PTRDIFF_MAX + 1,
    (size_t)PTRDIFF_MAX - 4096,
    (size_t)1 << 62,
    (size_t)1 << 58, /* beyond even a 57-bit address space */
};
#define NHUGE (sizeof huge_sizes / sizeof huge_sizes[0])

#define EXPECT_ENOMEM(expr, sz)                                              \
  do {                                                                       \
    errno = 0;                                                               \
    void *r_ = (expr);                                                       \
    int e_ = errno;                                                          \
    CKF(r_ == NULL, "%s with size %zu (0x%zx) returned %p", #expr,           \
        (size_t)(sz), (size_t)(sz), r_);                                     \
    CKF(e_ == ENOMEM, "%s with size 0x%zx: errno %d (%s), want ENOMEM",     \
        #expr, (size_t)(sz), e_, strerror(e_));                              \
  } while (0)

static void test_enomem(void) {
  /* a live block that failed reallocs must leave intact */
  size_t qn = 300;
  unsigned char *q = T->malloc(qn);
  CK(q != NULL);
  fill_pattern(q, qn, 77);
  size_t bn = 3 * MiB;
  unsigned char *b = T->malloc(bn);
  CK(b != NULL);
  fill_fast(b, bn, 78);

  for (size_t i = 0; i < NHUGE; i++) {
    size_t s = huge_sizes[i];
    EXPECT_ENOMEM(T->malloc(s), s);
    EXPECT_ENOMEM(T->calloc(1, s), s);
    EXPECT_ENOMEM(T->calloc(s, 1), s);
    EXPECT_ENOMEM(T->realloc(NULL, s), s);
    EXPECT_ENOMEM(T->realloc(q, s), s);
    EXPECT_ENOMEM(T->realloc(b, s), s);
    EXPECT_ENOMEM(T->reallocarray(NULL, 1, s), s);
    EXPECT_ENOMEM(T->reallocarray(q, s, 1), s);
    EXPECT_ENOMEM(T->memalign(16, s), s);
    EXPECT_ENOMEM(T->memalign(64, s), s);
    EXPECT_ENOMEM(T->memalign(4096, s), s);
    EXPECT_ENOMEM(T->memalign((size_t)1 << 21, s), s);
    EXPECT_ENOMEM(T->memalign((size_t)1 << 30, s), s);
    EXPECT_ENOMEM(T->aligned_alloc(64, s), s);
    EXPECT_ENOMEM(T->aligned_alloc(4096, s), s);
    EXPECT_ENOMEM(T->valloc(s), s);
    EXPECT_ENOMEM(T->pvalloc(s), s);
    void *p = (void *)1;
    errno = 0;
    int r = T->posix_memalign(&p, 64, s);
    CKF(r == ENOMEM && errno == ENOMEM,
        "posix_memalign(64, 0x%zx) = %d errno %d, want ENOMEM and errno ENOMEM", s, r, errno);
    errno = 0;
    r = T->posix_memalign(&p, (size_t)1 << 20, s);
    CKF(r == ENOMEM && errno == ENOMEM,
        "posix_memalign(1M, 0x%zx) = %d errno %d, want ENOMEM and errno ENOMEM", s, r, errno);
    CKF(p == (void *)1, "posix_memalign wrote *out (%p) on failure", p);
  }
  /* alignment so big that align + size overflows */
  EXPECT_ENOMEM(T->memalign(SIZE_MAX / 2 + 1, 16), SIZE_MAX / 2 + 1);
  void *p = (void *)1;
  int r = T->posix_memalign(&p, SIZE_MAX / 2 + 1, 16);
  CKF(r == ENOMEM, "posix_memalign(2^63, 16) = %d, want ENOMEM", r);

  /* calloc / reallocarray multiplication overflow, including products that
   * wrap around to small numbers */
  static const size_t pairs[][2] = {
      {SIZE_MAX, 2},
      {2, SIZE_MAX},
      {SIZE_MAX, SIZE_MAX},
      {(size_t)1 << 32, (size_t)1 << 32},
      {SIZE_MAX / 2 + 1, 2},             /* == 2^64: wraps to 0 */
      {274177, 67280421310721ULL},       /* == 2^64 + 1: wraps to 1 */
      {((size_t)1 << 33) + 1, (size_t)1 << 31},
      {(size_t)1 << 63, (size_t)1 << 1},
      {65536, ((size_t)1 << 48) + 16},   /* wraps to 1 MiB */
      {PTRDIFF_MAX, 3},
  };
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    size_t n = pairs[i][0], s = pairs[i][1];
    errno = 0;
    void *x = T->calloc(n, s);
    int e = errno;
    CKF(x == NULL && e == ENOMEM, "calloc(%zu, %zu) = %p errno %d", n, s, x,
        e);
    errno = 0;
    x = T->reallocarray(NULL, n, s);
    e = errno;
    CKF(x == NULL && e == ENOMEM, "reallocarray(NULL, %zu, %zu) = %p errno %d",
        n, s, x, e);
    errno = 0;
    x = T->reallocarray(q, n, s);
    e = errno;
    CKF(x == NULL && e == ENOMEM, "reallocarray(q, %zu, %zu) = %p errno %d", n,
        s, x, e);
  }
  CK(check_pattern(q, qn, 77) == (size_t)-1);
  CK(check_fast(b, bn, 78));
  /* still valid, still ours */
  CK(T->usable(q) >= qn);
  q = T->realloc(q, 5000);
  CK(q != NULL);
  CK(check_pattern(q, qn, 77) == (size_t)-1);
  T->free(q);
  T->free(b);
}

/* ---------------------------------------------------------------------- */
static void test_einval(void) {
  static const size_t bad_pm[] = {0,  1,  2,  4,   3,   5,      12,
                                  24, 40, 48, 100, 4097, 3 << 20, SIZE_MAX,
                                  SIZE_MAX - 7};
  for (size_t i = 0; i < sizeof bad_pm / sizeof bad_pm[0]; i++) {
    void *p = (void *)&bad_pm;
    errno = 4242;
    int r = T->posix_memalign(&p, bad_pm[i], 64);
    CKF(r == EINVAL, "posix_memalign(align=%zu) returned %d, want EINVAL",
        bad_pm[i], r);
    CKF(errno == 4242, "posix_memalign(align=%zu) changed errno to %d",
        bad_pm[i], errno);
  }
  /* C23 (and glibc >= 2.38) aligned_alloc: the alignment must be a power of
   * two. */
  static const size_t bad_aa[] = {0, 3, 5, 24, 48, 100, 4097, SIZE_MAX};
  for (size_t i = 0; i < sizeof bad_aa / sizeof bad_aa[0]; i++) {
    errno = 0;
    void *p = T->aligned_alloc(bad_aa[i], 64);
    int e = errno;
    CKF(p == NULL && e == EINVAL,
        "aligned_alloc(align=%zu, 64) = %p errno %d, want NULL/EINVAL",
        bad_aa[i], p, e);
  }
  /* glibc memalign: an alignment above SIZE_MAX/2+1 cannot be a power of
   * two -> EINVAL. */
  static const size_t bad_ma[] = {SIZE_MAX / 2 + 2, SIZE_MAX - 4095,
                                  SIZE_MAX};
  for (size_t i = 0; i < sizeof bad_ma / sizeof bad_ma[0]; i++) {
    errno = 0;
    void *p = T->memalign(bad_ma[i], 64);
    int e = errno;
    CKF(p == NULL && e == EINVAL, "memalign(0x%zx, 64) = %p errno %d",
        bad_ma[i], p, e);
  }
  /* glibc memalign rounds other non-powers of two up to the next power of
   * two; EINVAL is accepted too, but never a misaligned block. */
  static const size_t odd_ma[] = {3, 24, 48, 100, 4097, 3 << 20};
  for (size_t i = 0; i < sizeof odd_ma / sizeof odd_ma[0]; i++) {
    size_t a = odd_ma[i], pow2 = 1;
    while (pow2 < a) pow2 <<= 1;
    errno = 0;
    void *p = T->memalign(a, 100);
    int e = errno;
    if (p == NULL) {
      CKF(e == EINVAL, "memalign(%zu, 100) = NULL, errno %d", a, e);
    } else {
      CKF(aligned(p, pow2), "memalign(%zu, 100) = %p, not %zu-aligned", a, p,
          pow2);
      CK(T->usable(p) >= 100);
      memset(p, 1, 100);
      T->free(p);
    }
  }
  /* memalign with alignment 0 or below 16 acts as malloc */
  for (size_t a = 0; a <= 16; a = a ? a * 2 : 1) {
    void *p = T->memalign(a, 40);
    CKF(p != NULL && aligned(p, 16), "memalign(%zu, 40) = %p", a, p);
    T->free(p);
  }
}

/* ---------------------------------------------------------------------- */
static void test_min_alignment(void) {
  enum { N = 4096 };
  static void *v[N + 1];
  static size_t us[N + 1];
  for (size_t s = 1; s <= N; s++) {
    v[s] = T->malloc(s);
    CKF(v[s] != NULL, "malloc(%zu) = NULL", s);
    CKF(aligned(v[s], 16), "malloc(%zu) = %p, not 16-aligned", s, v[s]);
    us[s] = T->usable(v[s]);
    CKF(us[s] >= s, "usable(malloc(%zu)) = %zu", s, us[s]);
    fill_fast(v[s], us[s], s);
  }
  for (size_t s = 1; s <= N; s++)
    CKF(check_fast(v[s], us[s], s), "block of size %zu (usable %zu) at %p "
        "was overwritten: blocks overlap", s, us[s], v[s]);
  for (size_t s = 1; s <= N; s++) T->free(v[s]);

  /* calloc and realloc results too */
  for (size_t s = 1; s <= 2048; s += 7) {
    void *p = T->calloc(1, s);
    CKF(p && aligned(p, 16), "calloc(1,%zu) = %p", s, p);
    void *r = T->realloc(p, s * 2 + 1);
    CKF(r && aligned(r, 16), "realloc(.., %zu) = %p", s * 2 + 1, r);
    T->free(r);
  }
  /* sampled larger sizes */
  rng_t rg;
  rng_seed(&rg, 1);
  for (int i = 0; i < 300; i++) {
    size_t s = (size_t)rng_range(&rg, 4097, 8 * MiB);
    void *p = T->malloc(s);
    CKF(p && aligned(p, 16), "malloc(%zu) = %p", s, p);
    size_t u = T->usable(p);
    CKF(u >= s, "usable(malloc(%zu)) = %zu", s, u);
    ((volatile char *)p)[0] = 1;
    ((volatile char *)p)[u - 1] = 1;
    T->free(p);
  }
}

/* ---------------------------------------------------------------------- */
static void one_aligned(const char *fn, void *p, size_t a, size_t s) {
  CKF(p != NULL, "%s(align=%zu, size=%zu) = NULL (errno %d)", fn, a, s,
      errno);
  CKF(aligned(p, a), "%s(align=%zu, size=%zu) = %p: misaligned", fn, a, s, p);
  size_t u = T->usable(p);
  CKF(u >= s, "%s(align=%zu, size=%zu): usable %zu", fn, a, s, u);
  memset(p, 0xa5, s);
  ((volatile char *)p)[u - 1] = 0x11;
}

static void test_pow2_alignments(void) {
  for (int lg = 0; lg <= 30; lg++) {
    size_t a = (size_t)1 << lg;
    size_t cap = 2 * MiB;
    size_t sizes[] = {1, 24, 100, a < cap ? a : cap, a + 1 < cap ? a + 1 : cap,
                      a * 3 < cap ? a * 3 : cap, 5000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      size_t s = sizes[k];
      void *p = T->memalign(a, s);
      one_aligned("memalign", p, a, s);
      T->free(p);
      p = T->aligned_alloc(a, s);
      one_aligned("aligned_alloc", p, a, s);
      T->free(p);
      if (a >= sizeof(void *)) {
        p = NULL;
        int r = T->posix_memalign(&p, a, s);
        CKF(r == 0, "posix_memalign(%zu, %zu) = %d", a, s, r);
        one_aligned("posix_memalign", p, a, s);
        if (T->free_aligned_sized)
          T->free_aligned_sized(p, a, s);
        else
          T->free(p);
      }
    }
    /* several live at once, no overlap (the mimalloc memalign(256, 256)
     * class of bug) */
    if (a <= 64 * KiB) {
      enum { M = 48 };
      void *v[M];
      for (int i = 0; i < M; i++) {
        size_t s = (i % 3 == 0) ? a : (i % 3 == 1) ? a / 2 + 1 : 3 * a;
        v[i] = T->memalign(a, s);
        one_aligned("memalign", v[i], a, s);
        fill_fast(v[i], T->usable(v[i]), (uint64_t)i * 1000 + lg);
      }
      for (int i = 0; i < M; i++) {
        CKF(check_fast(v[i], T->usable(v[i]), (uint64_t)i * 1000 + lg),
            "memalign(%zu) blocks overlap (#%d)", a, i);
        T->free(v[i]);
      }
    }
  }
  /* valloc / pvalloc */
  static const size_t vs[] = {1, 100, 4095, 4096, 4097, 10000, 65536, 1 << 20,
                              (1 << 20) + 1};
  for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
    size_t s = vs[i];
    void *p = T->valloc(s);
    one_aligned("valloc", p, PAGE_SZ, s);
    T->free(p);
    p = T->pvalloc(s);
    size_t rounded = (s + PAGE_SZ - 1) & ~(PAGE_SZ - 1);
    one_aligned("pvalloc", p, PAGE_SZ, rounded);
    memset(p, 0x3c, T->usable(p));
    T->free(p);
  }
}

/* ---------------------------------------------------------------------- */
static void test_usable_size(void) {
  enum { M = 256 };
  void *v[M];
  size_t u[M];
  rng_t rg;
  rng_seed(&rg, 2);
  for (int round = 0; round < 4; round++) {
    for (int i = 0; i < M; i++) {
      size_t s;
      switch (rng_next(&rg) % 4) {
        case 0: s = rng_range(&rg, 0, 256); break;
        case 1: s = rng_range(&rg, 257, 16384); break;
        case 2: s = rng_range(&rg, 16385, 512 * KiB); break;
        default: s = rng_range(&rg, 512 * KiB, 3 * MiB); break;
      }
      v[i] = T->malloc(s);
      CKF(v[i] != NULL, "malloc(%zu)", s);
      u[i] = T->usable(v[i]);
      CKF(u[i] >= s, "usable(malloc(%zu)) = %zu", s, u[i]);
      fill_fast(v[i], u[i], (uint64_t)round * M + i);
    }
    for (int i = 0; i < M; i++) {
      CKF(T->usable(v[i]) == u[i], "usable size of %p changed", v[i]);
      CKF(check_fast(v[i], u[i], (uint64_t)round * M + i),
          "writing the usable size of one block clobbered another (%p, "
          "usable %zu)", v[i], u[i]);
      T->free(v[i]);
    }
  }
}

/* Every small request's usable size against the class rule (alloc/types.h):
 * under 16 bytes more up to 128, at most an eighth more above, and at most
 * 1/32 of the power of two more for a power of two from 512 B to 4 KiB
 * plus up to an eighth of it (a header). */
static void test_usable_bound(void) {
  for (size_t s = 1; s <= 64 * KiB; s++) {
    void *p = T->malloc(s);
    CKF(p != NULL, "malloc(%zu)", s);
    size_t u = T->usable(p), pow2 = (size_t)1 << (63 - __builtin_clzll((s - 1) | 1));
    CKF(u >= s, "usable(malloc(%zu)) = %zu", s, u);
    if (s <= 128)
      CKF(u - s < 16, "usable(malloc(%zu)) = %zu: 16 B or more over", s, u);
    else
      CKF((u - s) * 8 <= s, "usable(malloc(%zu)) = %zu: more than 12.5%% over", s, u);
    if (s > pow2 && pow2 >= 512 && pow2 <= 4096 && (s - pow2) * 8 <= pow2)
      CKF((u - s) * 32 < pow2, "usable(malloc(%zu)) = %zu: more than %zu over", s, u,
          pow2 / 32);
    T->free(p);
  }
}

/* ---------------------------------------------------------------------- */
static void test_realloc(void) {
  /* boundary sizes up to 32 MiB: class edges, page edges, large/huge */
  size_t sizes[400];
  size_t n = 0;
  for (size_t s = 1; s <= 32 * MiB; s <<= 1) {
    sizes[n++] = s;
    if (s > 2) sizes[n++] = s - 1;
    sizes[n++] = s + 1;
    if (s >= 4) sizes[n++] = s + s / 2;
  }
  uint64_t tag = 1000;
  unsigned char *p = NULL;
  size_t cur = 0;
  void *blockers[400];
  size_t nb = 0;
  /* walk up, then down, then a random walk */
  size_t order[1200];
  size_t no = 0;
  for (size_t i = 0; i < n; i++) order[no++] = sizes[i];
  for (size_t i = n; i-- > 0;) order[no++] = sizes[i];
  rng_t rg;
  rng_seed(&rg, 3);
  for (int i = 0; i < 300; i++) order[no++] = sizes[rng_next(&rg) % n];
  for (size_t i = 0; i < no; i++) {
    size_t ns = order[i];
    unsigned char *np = T->realloc(p, ns);
    CKF(np != NULL, "realloc(%p, %zu) = NULL", (void *)p, ns);
    CKF(((uintptr_t)np & 15) == 0, "realloc(%zu) misaligned", ns);
    CKF(T->usable(np) >= ns, "usable(realloc(.., %zu)) = %zu", ns,
        T->usable(np));
    if (p != NULL) {
      /* a block of size s holds: all of it (s <= 64 KiB), or its first
       * 32 KiB (tag) and last 4 KiB (tag + 1) */
      size_t keep = cur < ns ? cur : ns;
      size_t head = cur <= 65536 ? keep : (keep < 32768 ? keep : 32768);
      size_t bad = check_pattern(np, head, tag);
      CKF(bad == (size_t)-1,
          "realloc %zu -> %zu lost content at offset %zu", cur, ns, bad);
      if (cur > 65536 && ns >= cur)
        CKF(check_pattern(np + cur - 4096, 4096, tag + 1) == (size_t)-1,
            "realloc %zu -> %zu lost content at the end", cur, ns);
    }
    tag += 2;
    p = np;
    cur = ns;
    if (cur <= 65536) {
      fill_pattern(p, cur, tag);
    } else {
      fill_pattern(p, 32768, tag);
      fill_pattern(p + cur - 4096, 4096, tag + 1);
    }
    /* blockers keep in-place growth from always being possible */
    if ((i % 3) == 0 && nb < 400) blockers[nb++] = T->malloc(cur % 5000 + 1);
  }
  for (size_t i = 0; i < nb; i++) T->free(blockers[i]);
  T->free(p);

  /* realloc(NULL, n) is malloc */
  p = T->realloc(NULL, 1234);
  CK(p != NULL && T->usable(p) >= 1234);
  memset(p, 1, 1234);
  /* realloc(p, 0) frees and returns NULL */
  errno = 0;
  CK(T->realloc(p, 0) == NULL);
  size_t big = 8 * MiB;
  for (int i = 0; i < 3; i++) {
    void *b = T->malloc(big);
    CK(b != NULL);
    memset(b, 1, big);
    size_t a0 = stat_allocated();
    void *r = T->realloc(b, 0);
    CKF(r == NULL, "realloc(p, 0) returned %p, want NULL", r);
    size_t a1 = stat_allocated();
    CKF(a1 + big <= a0, "realloc(p, 0) did not free: stats.allocated %zu -> "
        "%zu", a0, a1);
  }
  /* reallocarray grows and keeps content */
  unsigned *arr = T->reallocarray(NULL, 100, sizeof(unsigned));
  CK(arr != NULL);
  for (unsigned i = 0; i < 100; i++) arr[i] = i * 7;
  arr = T->reallocarray(arr, 100000, sizeof(unsigned));
  CK(arr != NULL);
  for (unsigned i = 0; i < 100; i++) CK(arr[i] == i * 7);
  T->free(arr);
}

/* ---------------------------------------------------------------------- */
static int all_zero(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

static void test_calloc(void) {
  static const size_t sizes[] = {1,     8,      16,      24,      100,
                                 1000,  4096,   10000,   65536,   200000,
                                 1 << 20, 3 << 20, 16 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t s = sizes[i];
    for (int rep = 0; rep < 3; rep++) {
      /* dirty a block of the same size, free it, calloc again */
      unsigned char *d = T->malloc(s);
      CK(d != NULL);
      memset(d, 0xab, s);
      T->free(d);
      unsigned char *z = (rep == 1 && s % 8 == 0) ? T->calloc(s / 8, 8)
                                                   : T->calloc(1, s);
      CKF(z != NULL, "calloc(%zu)", s);
      CKF(all_zero(z, s), "calloc(%zu) returned dirty memory (rep %d)", s,
          rep);
      memset(z, 0xcd, s);
      T->free(z);
    }
  }
  /* many small dirty blocks freed, then calloc'ed back */
  enum { M = 2000 };
  static void *v[M];
  for (size_t s = 16; s <= 2048; s *= 2) {
    for (int i = 0; i < M; i++) {
      v[i] = T->malloc(s);
      CK(v[i] != NULL);
      memset(v[i], 0xee, s);
    }
    for (int i = 0; i < M; i++) T->free(v[i]);
    for (int i = 0; i < M; i++) {
      v[i] = T->calloc(s, 1);
      CKF(v[i] && all_zero(v[i], s), "calloc(%zu,1) #%d dirty", s, i);
    }
    for (int i = 0; i < M; i++) T->free(v[i]);
  }
  /* usable tail of a calloc'ed small block need not be zero, but the
   * requested part must be: odd sizes */
  for (size_t s = 1; s < 600; s += 13) {
    unsigned char *d = T->malloc(s);
    memset(d, 0xff, T->usable(d));
    T->free(d);
    unsigned char *z = T->calloc(s, 1);
    CKF(all_zero(z, s), "calloc(%zu,1) dirty", s);
    T->free(z);
  }
}

/* ---------------------------------------------------------------------- */
static void test_free_errno_and_sized(void) {
  static const size_t sizes[] = {0, 1, 100, 5000, 40000, 300000, 5 << 20,
                                 64 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    void *p = T->malloc(sizes[i]);
    CK(p != NULL);
    if (sizes[i]) memset(p, 1, sizes[i]);
    errno = 777;
    T->free(p);
    CKF(errno == 777, "free of a %zu-byte block changed errno to %d",
        sizes[i], errno);
    p = T->memalign(8192, sizes[i]);
    errno = 778;
    T->free(p);
    CKF(errno == 778, "free of memalign(8192, %zu) changed errno to %d",
        sizes[i], errno);
  }
  errno = 779;
  T->free(NULL);
  CK(errno == 779);
  /* after a trim the next frees must not leak errno either */
  T->malloc_trim(0);
  void *p = T->malloc(1 << 20);
  errno = 780;
  T->free(p);
  CK(errno == 780);

  CKF(T->free_sized != NULL, "%s", "free_sized is not exported");
  CKF(T->free_aligned_sized != NULL, "%s",
      "free_aligned_sized is not exported");
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    void *q = T->malloc(sizes[i]);
    CK(q != NULL);
    T->free_sized(q, sizes[i]);
    q = T->aligned_alloc(256, sizes[i]);
    CK(q != NULL);
    T->free_aligned_sized(q, 256, sizes[i]);
  }
  /* free_sized must really free */
  void *b = T->malloc(16 * MiB);
  memset(b, 2, 16 * MiB);
  size_t a0 = stat_allocated();
  T->free_sized(b, 16 * MiB);
  size_t a1 = stat_allocated();
  CKF(a1 + 16 * MiB <= a0, "free_sized did not free: %zu -> %zu", a0, a1);
}

/* ---------------------------------------------------------------------- */
static void test_stats_served(void) {
  enum { NB = 16 };
  size_t bs = 1 * MiB;
  void *v[NB];
  size_t a0 = stat_allocated();
  for (int i = 0; i < NB; i++) {
    v[i] = T->malloc(bs);
    CK(v[i] != NULL);
    memset(v[i], i, bs);
  }
  size_t a1 = stat_allocated();
  CKF(a1 >= a0 + NB * bs,
      "stats.allocated grew by %zd after allocating %zu bytes",
      (ssize_t)(a1 - a0), NB * bs);
  for (int i = 0; i < NB; i++) T->free(v[i]);
  size_t a2 = stat_allocated();
  CKF(a2 + NB * bs <= a1,
      "stats.allocated dropped by only %zd after freeing %zu bytes",
      (ssize_t)(a1 - a2), NB * bs);

  /* the same for calloc and aligned */
  a0 = stat_allocated();
  void *c = T->calloc(4, 2 * MiB);
  void *m = T->memalign(1 << 16, 3 * MiB);
  CK(c && m);
  a1 = stat_allocated();
  CKF(a1 >= a0 + 11 * MiB, "calloc+memalign: allocated %zu -> %zu", a0, a1);
  T->free(c);
  T->free(m);
  a2 = stat_allocated();
  CKF(a2 + 11 * MiB <= a1, "allocated %zu -> %zu after free", a1, a2);
}

/* ---------------------------------------------------------------------- */
static size_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  CHECK(f != NULL);
  unsigned long size = 0, res = 0;
  CHECK(fscanf(f, "%lu %lu", &size, &res) == 2);
  fclose(f);
  return (size_t)res * PAGE_SZ;
}

/* calloc of a big block must not touch it: freshly mapped pages are zero
 * already (glibc and jemalloc rely on this; touching makes calloc(1 GiB)
 * cost a second and 1 GiB of RSS). */
static void test_calloc_lazy(void) {
  size_t s = (size_t)1 << 30;
  size_t r0 = rss_bytes();
  unsigned char *z = T->calloc(1, s);
  CK(z != NULL);
  size_t r1 = rss_bytes();
  CKF(r1 < r0 + 128 * MiB,
      "calloc(1, 1 GiB) made %zu MiB resident: it wrote the fresh pages",
      (r1 - r0) / MiB);
  CK(z[0] == 0 && z[s / 2] == 0 && z[s - 1] == 0);
  T->free(z);
  unsigned char *c = T->calloc(4096, 64 * KiB); /* 256 MiB */
  CK(c != NULL);
  size_t r2 = rss_bytes();
  CKF(r2 < r0 + 128 * MiB,
      "calloc(4096, 64 KiB) made %zu MiB resident", (r2 - r0) / MiB);
  CK(c[12345] == 0 && c[(size_t)4096 * 64 * KiB - 1] == 0);
  T->free(c);
  /* the same after a block of that size was used and freed: a dirty
   * region may be reused, but zeroed by giving the pages back
   * (MADV_DONTNEED) or a fresh map, not by writing 256 MiB of zeros */
  size_t s2 = 256 * MiB;
  unsigned char *d = T->malloc(s2);
  CK(d != NULL);
  d[0] = d[s2 / 2] = d[s2 - 1] = 0xff;
  T->free(d);
  size_t r3 = rss_bytes();
  unsigned char *e = T->calloc(1, s2);
  CK(e != NULL);
  size_t r4 = rss_bytes();
  CK(e[0] == 0 && e[s2 / 2] == 0 && e[s2 - 1] == 0);
  CKF(r4 < r3 + 64 * MiB,
      "calloc(1, 256 MiB) after malloc/touch 3 bytes/free of 256 MiB made "
      "%zu MiB resident: it memset the whole reused block", (r4 - r3) / MiB);
  T->free(e);
}

/* > 4 GiB: no 32-bit truncation anywhere. Only a few pages are touched. */
static void test_beyond_4g(void) {
  unsigned char *z = T->calloc(((size_t)1 << 30) + 1, 5);
  CK(z != NULL);
  CK(T->usable(z) >= ((size_t)5 << 30) + 5);
  CK(z[0] == 0 && z[(size_t)3 << 30] == 0 && z[((size_t)5 << 30) + 4] == 0);
  T->free(z);
  size_t s = ((size_t)5 << 30) + 12345;
  unsigned char *p = T->malloc(s);
  if (p == NULL) {
    fprintf(stderr, "note: malloc(5 GiB) failed (errno %d); skipped\n", errno);
    return;
  }
  CK(T->usable(p) >= s);
  p[0] = 1;
  p[s / 2] = 2;
  p[s - 1] = 3;
  CK(p[0] == 1 && p[s / 2] == 2 && p[s - 1] == 3);
  T->free(p);
}

/* vm.overcommit_memory: 0 heuristic, 1 always, 2 strict; -1 unknown */
static int overcommit_mode(void) {
  FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
  int m = -1;
  if (f != NULL) {
    if (fscanf(f, "%d", &m) != 1) m = -1;
    fclose(f);
  }
  return m;
}

/* Address space of the process (VmSize), from /proc/self/statm. */
static size_t vm_size(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  size_t pages = 0;
  CK(f != NULL);
  CK(fscanf(f, "%zu", &pages) == 1);
  fclose(f);
  return pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* What cannot be backed is refused, as glibc's mmap path has the kernel
 * refuse it (issue 10, defect 10): under the default heuristic (mode 0)
 * and strict accounting (mode 2) a request past RAM + swap fails with
 * ENOMEM and leaves nothing reserved; under mode 1 (always overcommit)
 * glibc's succeeds too, so that part is skipped there. A block that had a
 * mapping of its own gives its address space back when freed. */
static void test_unbackable(void) {
  int mode = overcommit_mode();
  size_t vm0 = vm_size();
  if (mode == 0 || mode == 2) {
    void *q = T->malloc(100);
    CK(q != NULL);
    for (int lg = 40; lg <= 45; lg++) {
      size_t s = (size_t)1 << lg;
      EXPECT_ENOMEM(T->malloc(s), s);
      EXPECT_ENOMEM(T->calloc(1, s), s);
      EXPECT_ENOMEM(T->memalign((size_t)2 << 20, s), s);
      EXPECT_ENOMEM(T->realloc(q, s), s);
    }
    T->free(q);
    size_t vm1 = vm_size();
    CKF(vm1 < vm0 + 64 * MiB, "refused requests left %zu MiB of address space reserved",
        (vm1 - vm0) / MiB);
  } else {
    fprintf(stderr, "note: vm.overcommit_memory=%d: unbackable requests not checked\n", mode);
  }
  size_t s = (size_t)512 << 20;
  unsigned char *p = T->malloc(s);
  CK(p != NULL);
  p[0] = 1;
  p[s - 1] = 2;
  size_t vm1 = vm_size();
  CK(vm1 >= vm0 + s);
  T->free(p);
  size_t vm2 = vm_size();
  CKF(vm2 + s / 2 <= vm1, "free of a 512 MiB block kept its address space: VmSize %zu -> "
      "%zu MiB", vm1 / MiB, vm2 / MiB);
}

/* ---------------------------------------------------------------------- */
static void run_suite(const api_t *api) {
  T = api;
  fprintf(stderr, "api_contract: [%s]\n", T->name);
  static const struct {
    const char *name;
    void (*fn)(void);
  } parts[] = {{"zero sizes", test_zero_sizes},
               {"ENOMEM", test_enomem},
               {"EINVAL", test_einval},
               {"16-byte alignment", test_min_alignment},
               {"power-of-two alignments", test_pow2_alignments},
               {"usable size", test_usable_size},
               {"usable size bound", test_usable_bound},
               {"realloc", test_realloc},
               {"calloc", test_calloc},
               {"free errno / sized", test_free_errno_and_sized},
               {"stats", test_stats_served},
               {"calloc is lazy", test_calloc_lazy},
               {"> 4 GiB", test_beyond_4g},
               {"unbackable / unreserve", test_unbackable}};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    parts[i].fn();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "  %-24s ok (%.2f s)\n", parts[i].name,
            (double)(t1.tv_sec - t0.tv_sec) +
                (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
  }
}

/* ---------------------------------------------------------------------- */
static void expect_from_libnalloc(const char *sym, bool required) {
  void *f = dlsym(RTLD_DEFAULT, sym);
  Dl_info di;
  if (f == NULL) {
    CHECKF(!required, "symbol %s is not exported by anything", sym);
    fprintf(stderr, "note: %s not found\n", sym);
    return;
  }
  CHECKF(dladdr(f, &di) != 0 && di.dli_fname != NULL, "dladdr(%s) failed",
         sym);
  if (strstr(di.dli_fname, "libnalloc") == NULL) {
    CHECKF(!required, "%s resolves to %s, not libnalloc", sym, di.dli_fname);
    fprintf(stderr, "note: %s resolves to %s\n", sym, di.dli_fname);
  }
}

static const api_t nalloc_api = {
    "nalloc_ names",       nalloc_malloc,         nalloc_free,
    nalloc_calloc,         nalloc_realloc,        nalloc_reallocarray,
    nalloc_posix_memalign, nalloc_aligned_alloc,  nalloc_memalign,
    nalloc_valloc,         nalloc_pvalloc,        nalloc_malloc_usable_size,
    nalloc_free_sized,     nalloc_free_aligned_sized, nalloc_malloc_trim,
};

#ifndef NALLOC_TEST_PREFIXED
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static const api_t libc_api = {
    "glibc names",  malloc,         free,          calloc,
    realloc,        reallocarray,   posix_memalign, aligned_alloc,
    memalign,       valloc,         pvalloc,       malloc_usable_size,
    free_sized,     free_aligned_sized, malloc_trim,
};

static size_t capture_stderr_of(void (*fn)(void), char *buf, size_t cap) {
  char path[] = "/tmp/nalloc_api_contract_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  unlink(path);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  fn();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  ssize_t n = pread(fd, buf, cap - 1, 0);
  close(fd);
  if (n < 0) n = 0;
  buf[n] = 0;
  return (size_t)n;
}

static void call_malloc_stats(void) { malloc_stats(); }
static void call_nalloc_malloc_stats(void) { nalloc_malloc_stats(); }

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*memalign_fn)(size_t, size_t);

static void test_glibc_extras(void) {
  static const char *required[] = {
      "malloc", "free", "calloc", "realloc", "reallocarray",
      "posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc",
      "malloc_usable_size", "free_sized", "free_aligned_sized",
      "malloc_trim", "mallinfo", "mallinfo2", "malloc_stats",
      "__libc_malloc", "__libc_free", "__libc_calloc", "__libc_realloc",
      "__libc_memalign", "__libc_valloc", "__libc_pvalloc",
      "nalloc_malloc", "nalloc_free", "nalloc_calloc", "nalloc_realloc",
      "nalloc_reallocarray", "nalloc_posix_memalign", "nalloc_aligned_alloc",
      "nalloc_memalign", "nalloc_valloc", "nalloc_pvalloc",
      "nalloc_malloc_usable_size", "nalloc_free_sized",
      "nalloc_free_aligned_sized", "nalloc_malloc_trim",
      "nalloc_malloc_stats", "nalloc_ctl"};
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
    expect_from_libnalloc(required[i], true);
  /* informative only */
  expect_from_libnalloc("__libc_mallinfo", false);
  expect_from_libnalloc("mallopt", false);

  /* the __libc_ names hand out nalloc memory, interchangeable with free */
  malloc_fn lm = (malloc_fn)dlsym(RTLD_DEFAULT, "__libc_malloc");
  free_fn lf = (free_fn)dlsym(RTLD_DEFAULT, "__libc_free");
  calloc_fn lc = (calloc_fn)dlsym(RTLD_DEFAULT, "__libc_calloc");
  realloc_fn lr = (realloc_fn)dlsym(RTLD_DEFAULT, "__libc_realloc");
  memalign_fn lma = (memalign_fn)dlsym(RTLD_DEFAULT, "__libc_memalign");
  CHECK(lm && lf && lc && lr && lma);
  size_t a0 = stat_allocated();
  char *p = lm(2 * MiB);
  CHECK(p != NULL);
  memset(p, 7, 2 * MiB);
  CHECK(stat_allocated() >= a0 + 2 * MiB);
  CHECK(malloc_usable_size(p) >= 2 * MiB);
  p = lr(p, 3 * MiB);
  CHECK(p != NULL && p[2 * MiB - 1] == 7);
  free(p);
  char *z = lc(1000, 10);
  CHECK(z != NULL && all_zero((unsigned char *)z, 10000));
  lf(z);
  void *m = lma(4096, 100);
  CHECK(m != NULL && aligned(m, 4096));
  CHECK(nalloc_malloc_usable_size(m) >= 100);
  nalloc_free(m);
  void *q = malloc(50);
  lf(q);
  /* the prefixed and plain names are one heap */
  q = nalloc_malloc(70);
  CHECK(malloc_usable_size(q) >= 70);
  free(q);
  q = malloc(90);
  nalloc_free(q);

  /* mallinfo / mallinfo2 describe nalloc's heap */
  size_t live = 24 * MiB;
  void *blk = malloc(live);
  memset(blk, 3, live);
  struct mallinfo2 mi2 = mallinfo2();
  CHECKF(mi2.uordblks + mi2.hblkhd >= live,
         "mallinfo2: uordblks %zu + hblkhd %zu < %zu bytes live",
         mi2.uordblks, mi2.hblkhd, live);
  struct mallinfo mi = mallinfo();
  CHECKF((size_t)(unsigned)mi.uordblks + (size_t)(unsigned)mi.hblkhd >= live,
         "mallinfo: uordblks %d + hblkhd %d < %zu", mi.uordblks, mi.hblkhd,
         live);
  free(blk);
  struct mallinfo2 mi3 = mallinfo2();
  CHECKF(mi3.uordblks + mi3.hblkhd + live <= mi2.uordblks + mi2.hblkhd,
         "mallinfo2 did not drop after freeing %zu bytes (%zu -> %zu)", live,
         mi2.uordblks + mi2.hblkhd, mi3.uordblks + mi3.hblkhd);

  /* malloc_stats writes something to stderr */
  static char buf[65536];
  size_t n = capture_stderr_of(call_malloc_stats, buf, sizeof buf);
  CHECKF(n > 0, "%s", "malloc_stats() printed nothing on stderr");
  n = capture_stderr_of(call_nalloc_malloc_stats, buf, sizeof buf);
  CHECKF(n > 0, "%s", "nalloc_malloc_stats() printed nothing on stderr");
  int t = malloc_trim(0);
  CHECK(t == 0 || t == 1);
}
#pragma GCC diagnostic pop
#endif

int main(void) {
  fprintf(stderr, "api_contract: mode %s\n", A_MODE);
  expect_from_libnalloc("nalloc_malloc", true);
  expect_from_libnalloc("nalloc_ctl", true);
#ifndef NALLOC_TEST_PREFIXED
  test_glibc_extras();
  run_suite(&libc_api);
#endif
  run_suite(&nalloc_api);
  int t = nalloc_malloc_trim(0);
  CHECK(t == 0 || t == 1);
  printf("api_contract: ok\n");
  return 0;
}
