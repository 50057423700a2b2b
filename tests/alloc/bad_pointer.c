/* bad_pointer: a pointer nalloc does not own, passed to free / realloc /
 * malloc_usable_size, kills the process with SIGABRT and a message on
 * stderr that names nalloc -- never silent corruption. So does a double
 * free of any block, at the second free/realloc, whatever happened in
 * between (other frees, a flush of the thread's spans, another thread).
 * Each case runs in a forked child; the parent checks how it died and
 * what it said. A case that knows the pointer writes the message it must
 * print ("free(0x...): double free") to `want`, shared with the parent,
 * just before the bad call. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>

#include "check.h"

/* The text the child's message must contain (set by the case before the
 * bad call; MAP_SHARED so the parent reads it after the child died). */
static char *want;
static void expect(const char *call, const void *p, const char *what) {
  snprintf(want, 256, "%s(%p): %s", call, p, what);
}

static char static_buf[4096] __attribute__((aligned(64)));

typedef void (*case_fn)(void);

static void free_stack(void) {
  char buf[64] __attribute__((aligned(16)));
  memset(buf, 1, sizeof buf);
  void *volatile p = buf;
  A_FREE(p);
}
static void free_static(void) { A_FREE(static_buf + 16); }
static void free_interior_small(void) {
  char *p = A_MALLOC(64);
  CHECK(p != NULL);
  A_FREE(p + 16); /* 16-aligned, inside a 64-byte slot */
}
static void free_interior_small_odd(void) {
  char *p = A_MALLOC(100);
  CHECK(p != NULL);
  A_FREE(p + 1);
}
/* A span's pages may end in a tail shorter than a slot: 80-byte slots in
 * whole pages. The address one slot past its last slot is no block, but
 * starts a "slot" by the multiplication; freeing it set a bit past the last
 * slot, and malloc then handed out a block running past the span's end
 * (before the index was checked against nslots). Found by blocks whose
 * span ends right where the next span of the class starts. */
static int cmp_addr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}
static void free_span_tail(void) {
  enum { N = 20000, SZ = 80 };
  static uintptr_t v[N];
  for (int i = 0; i < N; i++) CHECK((v[i] = (uintptr_t)A_MALLOC(SZ)) != 0);
  qsort(v, N, sizeof v[0], cmp_addr);
  for (int i = 0; i + 1 < N; i++) {
    uintptr_t p = v[i] + SZ, next = v[i + 1];
    /* next starts a span (page-aligned) less than a slot after p: p is in
     * the tail of v[i]'s span */
    if (next > p && next - p < SZ && next % 4096 == 0) {
      expect("free", (void *)p, "invalid pointer");
      A_FREE((void *)p);
      return;
    }
  }
  CHECKF(0, "no two spans of %d-byte slots side by side in %d blocks", SZ, N);
}
static void free_interior_large(void) {
  char *p = A_MALLOC(256 * 1024);
  CHECK(p != NULL);
  A_FREE(p + 8192); /* page-aligned, inside a large run */
}
static void free_interior_huge(void) {
  char *p = A_MALLOC(16 << 20);
  CHECK(p != NULL);
  A_FREE(p + (4 << 20));
}
static void *foreign_page(void) {
  void *m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(m != MAP_FAILED);
  return m;
}
static void free_mmap(void) { A_FREE(foreign_page()); }
static void realloc_foreign(void) {
  void *r = A_REALLOC(static_buf, 100);
  (void)r;
}
static void realloc_mmap(void) {
  void *r = A_REALLOC((char *)foreign_page() + 4096, 100000);
  (void)r;
}
static void usable_foreign(void) {
  volatile size_t n = A_USABLE(static_buf);
  (void)n;
}
static void usable_stack(void) {
  char buf[32];
  volatile size_t n = A_USABLE(buf);
  (void)n;
}
static void usable_interior(void) {
  char *p = A_MALLOC(48);
  volatile size_t n = A_USABLE(p + 16);
  (void)n;
}
/* an immediate double free (nothing allocated in between) */
static void double_free_n(size_t n) {
  void *volatile p = A_MALLOC(n);
  CHECK(p != NULL);
  A_FREE(p);
  A_FREE(p);
}
static void double_free_small(void) { double_free_n(100); }
static void double_free_large(void) { double_free_n(300 * 1024); }
static void double_free_huge(void) { double_free_n(5 << 20); }
/* a double free with another free in between: the thread cache takes it,
 * and it is caught when the slots go back to their span (here: the cache
 * overflows, and flushes its oldest entries) */
static void double_free_later(void) {
  enum { N = 1024 };
  static void *blocks[N];
  for (int i = 0; i < N; i++) CHECK((blocks[i] = A_MALLOC(100)) != NULL);
  void *volatile p = A_MALLOC(100), *volatile q = A_MALLOC(100);
  CHECK(p != NULL && q != NULL);
  A_FREE(p);
  A_FREE(q);
  A_FREE(p);
  for (int i = 0; i < N; i++) A_FREE(blocks[i]);
}

/* ---- double frees of small blocks (issue 10, defect 2): the old engine
 * (922151f) kept freed blocks in a per-thread cache and checked them only
 * when they went back to their span, so free(a); free(b); free(a) and
 * then three malloc(32) returned a twice. ---- */

/* a, b, a: nothing between the two frees of a but another free */
static void double_free_aba(void) {
  void *volatile a = A_MALLOC(32), *volatile b = A_MALLOC(32);
  CHECK(a != NULL && b != NULL);
  A_FREE(a);
  A_FREE(b);
  expect("free", a, "double free");
  A_FREE(a);
  /* what the old engine did next: a handed out twice */
  void *x = A_MALLOC(32), *y = A_MALLOC(32), *z = A_MALLOC(32);
  fprintf(stderr, "not caught: malloc(32) x3 = %p %p %p (a = %p)\n", x, y, z, a);
}

/* a, b, a, with the thread's spans flushed after the first free of a: a's
 * slot is free in a span the thread no longer owns, so both later frees
 * are remote frees. */
static void double_free_aba_flushed(void) {
  void *volatile a = A_MALLOC(32), *volatile b = A_MALLOC(32);
  CHECK(a != NULL && b != NULL);
  A_FREE(a);
  tcache_flush();
  A_FREE(b);
  expect("free", a, "double free");
  A_FREE(a);
}

/* flushed between the two frees of a, the span kept by b */
static void double_free_flush_between(void) {
  void *volatile a = A_MALLOC(32), *volatile b = A_MALLOC(32);
  CHECK(a != NULL && b != NULL);
  A_FREE(a);
  tcache_flush();
  expect("free", a, "double free");
  A_FREE(a);
}

/* The one double free nalloc cannot tell from a valid free: the block was
 * handed out again in between (here: its span emptied, went back at the
 * flush, and the next malloc(32) carved a new span from the same pages).
 * The second free then frees the new owner's block, as with every
 * allocator. This case must NOT abort: it documents the limit. */
static void double_free_after_reuse(void) {
  void *volatile a = A_MALLOC(32);
  CHECK(a != NULL);
  A_FREE(a);
  tcache_flush();
  void *volatile q = A_MALLOC(32);
  CHECKF(q == a, "the case needs a handed out again (a %p, q %p)", (void *)a,
         (void *)q);
  A_FREE(a); /* frees q */
  void *volatile r = A_MALLOC(32);
  CHECK(r == q); /* q's slot was free again */
  _exit(0);
}


/* freed by its owner, freed again by another thread (a remote free of a
 * slot that is free in the owner's bitmap) */
static void double_free_owner_then_other(void) {
  void *volatile a = A_MALLOC(32), *volatile b = A_MALLOC(32);
  CHECK(a != NULL && b != NULL);
  A_FREE(a);
  expect("free", a, "double free");
  free_in_thread(a);
}

/* freed by another thread (remote bitmap), then by its owner */
static void double_free_other_then_owner(void) {
  void *volatile a = A_MALLOC(48), *volatile b = A_MALLOC(48);
  CHECK(a != NULL && b != NULL);
  free_in_thread(a);
  expect("free", a, "double free");
  A_FREE(a);
}

/* freed by another thread while its span is full (the owner moved on to
 * later spans, so the span is on its full list), then by its owner: the
 * owner's free into its own full span takes a way of its own
 * (heap_free_full), which must check the remote bitmap too */
static void double_free_full_span(void) {
  enum { N = 256 };
  static void *v[N];
  for (int i = 0; i < N; i++) CHECK((v[i] = A_MALLOC(1000)) != NULL);
  void *volatile a = v[0];
  free_in_thread(a);
  expect("free", a, "double free");
  A_FREE(a);
}

/* freed twice by two other threads (both remote) */
static void double_free_two_others(void) {
  void *volatile a = A_MALLOC(64), *volatile b = A_MALLOC(64);
  CHECK(a != NULL && b != NULL);
  free_in_thread(a);
  expect("free", a, "double free");
  free_in_thread(a);
}

/* freed remotely, the owner then collects the remote bit (its malloc
 * hands a out again once the free bitmap runs dry), frees a itself, and
 * frees it once more */
static void double_free_remote_collected(void) {
  enum { N = 4096 };
  static void *v[N];
  void *volatile a = A_MALLOC(80);
  CHECK(a != NULL);
  free_in_thread(a);
  int i = 0;
  while (i < N && (v[i] = A_MALLOC(80)) != a) CHECK(v[i++] != NULL);
  CHECKF(i < N, "a not handed out again in %d allocations", N);
  A_FREE(a);
  expect("free", a, "double free");
  A_FREE(a);
}

/* a block of a thread that exited (its span abandoned to the arena),
 * freed twice by the main thread */
static void *thread_alloc(void *arg) {
  (void)arg;
  void *p = A_MALLOC(96), *q = A_MALLOC(96);
  CHECK(p != NULL && q != NULL);
  return p; /* q keeps the span from emptying */
}
static void double_free_exited_owner(void) {
  pthread_t t;
  void *a;
  CHECK(pthread_create(&t, NULL, thread_alloc, NULL) == 0);
  CHECK(pthread_join(t, &a) == 0);
  A_FREE(a);
  expect("free", a, "double free");
  A_FREE(a);
}

/* free(p); realloc(p, 24) */
static void double_free_realloc(void) {
  void *volatile p = A_MALLOC(32), *volatile q = A_MALLOC(32);
  CHECK(p != NULL && q != NULL);
  A_FREE(p);
  expect("realloc", p, "double free");
  void *r = A_REALLOC(p, 24);
  fprintf(stderr, "not caught: realloc returned %p\n", r);
}

/* free(p); realloc(p, 0) (realloc as free) */
static void double_free_realloc0(void) {
  void *volatile p = A_MALLOC(32), *volatile q = A_MALLOC(32);
  CHECK(p != NULL && q != NULL);
  A_FREE(p);
  expect("realloc", p, "double free");
  void *r = A_REALLOC(p, 0);
  (void)r;
}

/* realloc frees the old block when it moves: the old pointer freed */
static void double_free_after_realloc_moved(void) {
  void *volatile p = A_MALLOC(32);
  CHECK(p != NULL);
  void *volatile q = A_REALLOC(p, 4000);
  CHECK(q != NULL && q != p);
  expect("free", p, "double free");
  A_FREE(p);
}

/* malloc_usable_size of a freed block */
static void usable_freed(void) {
  void *volatile p = A_MALLOC(32), *volatile q = A_MALLOC(32);
  CHECK(p != NULL && q != NULL);
  A_FREE(p);
  expect("malloc_usable_size", p, "double free");
  volatile size_t n = A_USABLE(p);
  (void)n;
}

/* the only block of its span: freed, the span emptied and (flush) given
 * back to the page heap, nothing allocated on its pages since. The page
 * map no longer maps the address to a small span: reported as an invalid
 * pointer ("not a block nalloc returned, or already freed"); with
 * tcache:false the arena's shared heap keeps the span and it is a double
 * free (hardening.c tells the two apart). */
static void double_free_span_returned(void) {
  void *volatile a = A_MALLOC(3000);
  CHECK(a != NULL);
  A_FREE(a);
  tcache_flush();
  expect("free", a, "");
  A_FREE(a);
}

/* large blocks: their span record is gone at the first free, the page map
 * ends point at a free run or at nothing */
static void double_free_large_aba(void) {
  void *volatile a = A_MALLOC(100 * 1024), *volatile b = A_MALLOC(100 * 1024);
  CHECK(a != NULL && b != NULL);
  A_FREE(a);
  A_FREE(b);
  expect("free", a, "invalid pointer");
  A_FREE(a);
}
static void double_free_aligned_large(void) {
  void *p = NULL;
  CHECK(A_POSIX_MEMALIGN(&p, 8192, 100) == 0 && p != NULL);
  A_FREE(p);
  expect("free", p, "invalid pointer");
  A_FREE(p);
}
static void double_free_aligned_small(void) {
  void *p = NULL, *q = NULL;
  CHECK(A_POSIX_MEMALIGN(&p, 256, 200) == 0 && p != NULL);
  CHECK(A_POSIX_MEMALIGN(&q, 256, 200) == 0 && q != NULL);
  A_FREE(p);
  A_FREE(q);
  expect("free", p, "double free");
  A_FREE(p);
}
static void double_free_large_realloc(void) {
  void *volatile p = A_MALLOC(200 * 1024);
  CHECK(p != NULL);
  A_FREE(p);
  expect("realloc", p, "invalid pointer");
  void *r = A_REALLOC(p, 24);
  (void)r;
}

#ifndef NALLOC_TEST_PREFIXED
/* a block of glibc's own heap (the real glibc malloc, bypassing the
 * override): the realistic "second heap" mistake */
static void free_glibc_block(void) {
  void *(*gm)(size_t) = (void *(*)(size_t))dlvsym(RTLD_NEXT, "malloc",
                                                  "GLIBC_2.2.5");
  if (gm == NULL) {
    /* cannot reach glibc's malloc: behave like a foreign pointer anyway */
    A_FREE(static_buf + 32);
    return;
  }
  void *p = gm(200);
  CHECK(p != NULL);
  free(p);
}
#endif

struct bad_case {
  const char *name;
  case_fn fn;
  bool caught; /* false: a documented limit, the child must exit 0 */
};

static int run_case(const struct bad_case *c) {
  /* the case fills `want`; a case that survives exits 42 */
  want[0] = 0;
  char err[8192];
  int st = check_in_child(c->fn, 20, 42, err, sizeof err);
  size_t n = strlen(err);
  bool ok = true;
  if (!c->caught) {
    ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && n == 0;
    fprintf(stderr, "%s %s: not caught (documented): %s %d; stderr: %s\n",
            ok ? "ok" : "FAIL", c->name, WIFEXITED(st) ? "exit status" : "signal",
            WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), err);
  } else if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT)) {
    fprintf(stderr, "FAIL %s: want death by SIGABRT, got %s %d; stderr: %s\n",
            c->name, WIFEXITED(st) ? "exit status" : "signal",
            WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), err);
    ok = false;
  } else if (strstr(err, "nalloc") == NULL) {
    fprintf(stderr, "FAIL %s: SIGABRT but stderr does not mention nalloc: "
            "\"%s\"\n", c->name, err);
    ok = false;
  } else if (want[0] != 0 && strstr(err, want) == NULL) {
    fprintf(stderr, "FAIL %s: the message does not say \"%s\": \"%s\"\n",
            c->name, want, err);
    ok = false;
  } else {
    fprintf(stderr, "ok %s: %s", c->name, err);
    if (n == 0 || err[n - 1] != '\n') fputc('\n', stderr);
  }
  return ok ? 0 : 1;
}

int main(void) {
  static const struct bad_case cases[] = {
      {"free(stack address)", free_stack, true},
      {"free(static array + 16)", free_static, true},
      {"free(malloc(64) + 16)", free_interior_small, true},
      {"free(malloc(100) + 1)", free_interior_small_odd, true},
      {"free(the tail of a span of 80-byte slots)", free_span_tail, true},
      {"free(malloc(256K) + 8K)", free_interior_large, true},
      {"free(malloc(16M) + 4M)", free_interior_huge, true},
      {"free(foreign mmap page)", free_mmap, true},
      {"realloc(static array, 100)", realloc_foreign, true},
      {"realloc(foreign mmap page + 4K, 100000)", realloc_mmap, true},
      {"malloc_usable_size(static array)", usable_foreign, true},
      {"malloc_usable_size(stack address)", usable_stack, true},
      {"malloc_usable_size(malloc(48) + 16)", usable_interior, true},
      {"double free of malloc(100)", double_free_small, true},
      {"double free of malloc(300K)", double_free_large, true},
      {"double free of malloc(5M)", double_free_huge, true},
      {"double free of malloc(100), another free between", double_free_later, true},
      {"free(a); free(b); free(a) (malloc(32))", double_free_aba, true},
      {"free(a); flush; free(b); free(a)", double_free_aba_flushed, true},
      {"free(a); flush; free(a)", double_free_flush_between, true},
      {"free(a) by its owner, then by another thread", double_free_owner_then_other, true},
      {"free(a) by another thread, then by its owner", double_free_other_then_owner, true},
      {"free(a) by another thread while its span is full, then by its owner",
       double_free_full_span, true},
      {"free(a) by two other threads", double_free_two_others, true},
      {"free(a) remotely, collected by the owner, free(a)", double_free_remote_collected, true},
      {"double free of an exited thread's block", double_free_exited_owner, true},
      {"double free of a block handed out again in between", double_free_after_reuse, false},
      {"free(p); realloc(p, 24)", double_free_realloc, true},
      {"free(p); realloc(p, 0)", double_free_realloc0, true},
      {"free(p) after realloc(p, 4000) moved it", double_free_after_realloc_moved, true},
      {"free(p); malloc_usable_size(p)", usable_freed, true},
      {"double free after the span went back to the page heap", double_free_span_returned, true},
      {"free(a); free(b); free(a) (malloc(100K))", double_free_large_aba, true},
      {"double free of posix_memalign(8K, 100)", double_free_aligned_large, true},
      {"double free of posix_memalign(256, 200)", double_free_aligned_small, true},
      {"free(p); realloc(p, 24) (malloc(200K))", double_free_large_realloc, true},
#ifndef NALLOC_TEST_PREFIXED
      {"free(block of glibc's own malloc)", free_glibc_block, true},
#endif
  };
  fprintf(stderr, "bad_pointer: %s\n", A_MODE);
  want = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(want != MAP_FAILED);
  int fails = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    fails += run_case(&cases[i]);
  CHECKF(fails == 0, "%d of %zu bad-pointer cases were not caught", fails,
         sizeof cases / sizeof cases[0]);
  printf("bad_pointer: ok\n");
  return 0;
}
