/* bad_pointer: a pointer nalloc does not own, passed to free / realloc /
 * malloc_usable_size, kills the process with SIGABRT and a message on
 * stderr that names nalloc -- never silent corruption. So does a double
 * free, immediate or caught when the slot goes back to its span. Each
 * case runs in
 * a forked child; the parent checks how it died and what it said. */
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
#include <unistd.h>

#include "check.h"

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
  bool check_addr_in_message;
};

static int run_case(const struct bad_case *c) {
  int pe[2];
  CHECK(pipe(pe) == 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    struct rlimit nocore = {0, 0};
    setrlimit(RLIMIT_CORE, &nocore);
    dup2(pe[1], 2);
    close(pe[0]);
    close(pe[1]);
    alarm(20);
    c->fn();
    /* survived: report it */
    _exit(42);
  }
  close(pe[1]);
  char err[8192];
  size_t n = 0;
  for (;;) {
    ssize_t r = read(pe[0], err + n, sizeof err - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
    if (n == sizeof err - 1) break;
  }
  err[n] = 0;
  close(pe[0]);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  bool ok = true;
  if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT)) {
    fprintf(stderr, "FAIL %s: want death by SIGABRT, got %s %d; stderr: %s\n",
            c->name, WIFEXITED(st) ? "exit status" : "signal",
            WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), err);
    ok = false;
  } else if (strstr(err, "nalloc") == NULL) {
    fprintf(stderr, "FAIL %s: SIGABRT but stderr does not mention nalloc: "
            "\"%s\"\n", c->name, err);
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
#ifndef NALLOC_TEST_PREFIXED
      {"free(block of glibc's own malloc)", free_glibc_block, true},
#endif
  };
  fprintf(stderr, "bad_pointer: %s\n", A_MODE);
  int fails = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    fails += run_case(&cases[i]);
  CHECKF(fails == 0, "%d of %zu bad-pointer cases were not caught", fails,
         sizeof cases / sizeof cases[0]);
  printf("bad_pointer: ok\n");
  return 0;
}
