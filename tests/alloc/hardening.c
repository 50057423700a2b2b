/* hardening: nalloc's documented outcome for each kind of heap misuse,
 * as one table (`cases` below), each case run in a forked child:
 *
 *   ABORT     the child dies by SIGABRT and its stderr holds the message
 *             "<call>(<pointer>): <what>" for the exact pointer misused
 *             (the case writes the expected text to shared memory before
 *             the bad call);
 *   CONTINUE  nothing is reported, the misuse changes nothing nalloc
 *             relies on, and the case's own checks pass (no block handed
 *             out twice, no allocation at an address the attacker wrote);
 *             the child exits 0 with nothing on stderr.
 *
 * The README's "what nalloc catches" table is this table:
 *   hardening                       runs every case
 *   hardening --table-md            prints the markdown table
 *   hardening --check-readme FILE   compares it with FILE's section
 *                                   between the hardening-table markers */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
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

enum outcome { ABORT, CONTINUE };

typedef struct {
  const char *misuse;  /* markdown: what the program does */
  void (*fn)(void);
  enum outcome expect;
  const char *call;    /* ABORT: the call named in the message */
  const char *what;    /* ABORT: the message after "call(ptr): " */
  const char *alt;     /* ABORT: another text allowed in some configurations... */
  const char *alt_when; /* ...this one (for the table) */
  const char *note;    /* CONTINUE: what happens instead */
} hcase_t;

static char *want; /* shared with the parent: the message expected */
static void expect_at(const char *call, const void *p, const char *what) {
  snprintf(want, 256, "%s(%p): %s", call, p, what);
}
#define DOUBLE "double free (the block is already free)"
#define INVALID "invalid pointer: not a block nalloc returned, or already freed"

static char static_buf[256] __attribute__((aligned(64)));

static void *thread_alloc(void *arg) {
  void **keep = arg;
  *keep = A_MALLOC(64); /* keeps the span from emptying */
  return A_MALLOC(64);
}

/* ---- double frees ---- */
static void df_aa(void) {
  void *volatile p = A_MALLOC(32);
  A_FREE(p);
  expect_at("free", p, DOUBLE);
  A_FREE(p);
}
static void df_aba(void) {
  void *volatile a = A_MALLOC(32), *volatile b = A_MALLOC(32);
  A_FREE(a);
  A_FREE(b);
  expect_at("free", a, DOUBLE);
  A_FREE(a);
}
static void df_abba(void) {
  void *volatile a = A_MALLOC(200), *volatile b = A_MALLOC(200);
  A_FREE(a);
  A_FREE(b);
  expect_at("free", b, DOUBLE);
  A_FREE(b);
}
static void df_flushed(void) {
  void *volatile a = A_MALLOC(32), *volatile b = A_MALLOC(32);
  A_FREE(a);
  tcache_flush();
  A_FREE(b);
  expect_at("free", a, DOUBLE);
  A_FREE(a);
}
static void df_owner_other(void) {
  void *volatile a = A_MALLOC(48), *volatile b = A_MALLOC(48);
  (void)b;
  A_FREE(a);
  expect_at("free", a, DOUBLE);
  free_in_thread(a);
}
static void df_other_owner(void) {
  void *volatile a = A_MALLOC(48), *volatile b = A_MALLOC(48);
  (void)b;
  free_in_thread(a);
  expect_at("free", a, DOUBLE);
  A_FREE(a);
}
static void df_other_other(void) {
  void *volatile a = A_MALLOC(48), *volatile b = A_MALLOC(48);
  (void)b;
  free_in_thread(a);
  expect_at("free", a, DOUBLE);
  free_in_thread(a);
}
static void df_exited(void) {
  pthread_t t;
  void *a, *keep;
  CHECK(pthread_create(&t, NULL, thread_alloc, &keep) == 0);
  CHECK(pthread_join(t, &a) == 0);
  A_FREE(a);
  expect_at("free", a, DOUBLE);
  A_FREE(a);
}
static void df_realloc(void) {
  void *volatile p = A_MALLOC(32), *volatile q = A_MALLOC(32);
  (void)q;
  A_FREE(p);
  expect_at("realloc", p, DOUBLE);
  void *r = A_REALLOC(p, 24);
  (void)r;
}
static void df_usable(void) {
  void *volatile p = A_MALLOC(32), *volatile q = A_MALLOC(32);
  (void)q;
  A_FREE(p);
  expect_at("malloc_usable_size", p, DOUBLE);
  volatile size_t n = A_USABLE(p);
  (void)n;
}
static void df_large(void) {
  void *volatile a = A_MALLOC(100 * 1024), *volatile b = A_MALLOC(100 * 1024);
  A_FREE(a);
  A_FREE(b);
  expect_at("free", a, INVALID);
  A_FREE(a);
}
static void df_aligned(void) {
  void *p = NULL;
  CHECK(A_POSIX_MEMALIGN(&p, 8192, 100) == 0);
  A_FREE(p);
  expect_at("free", p, INVALID);
  A_FREE(p);
}
static void df_span_gone(void) {
  void *volatile a = A_MALLOC(3000);
  A_FREE(a);
  tcache_flush(); /* the empty span goes back to the page heap */
  expect_at("free", a, INVALID);
  A_FREE(a);
}
static void df_reused(void) {
  void *volatile a = A_MALLOC(32);
  A_FREE(a);
  tcache_flush();
  void *volatile q = A_MALLOC(32); /* a new span on the same pages */
  CHECKF(q == a, "the case needs a handed out again (a %p, q %p)", (void *)a, (void *)q);
  A_FREE(a); /* frees q */
  CHECK(A_MALLOC(32) == q);
}

/* ---- pointers nalloc never returned ---- */
static void bad_stack(void) {
  char buf[64] __attribute__((aligned(16)));
  void *volatile p = buf;
  expect_at("free", p, INVALID);
  A_FREE(p);
}
static void bad_static(void) {
  expect_at("free", static_buf + 16, INVALID);
  A_FREE(static_buf + 16);
}
static void bad_interior(void) {
  char *p = A_MALLOC(64);
  expect_at("free", p + 16, INVALID);
  A_FREE(p + 16);
}
static void bad_interior_large(void) {
  char *p = A_MALLOC(256 * 1024);
  expect_at("free", p + 8192, INVALID);
  A_FREE(p + 8192);
}
static void bad_mmap(void) {
  void *m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(m != MAP_FAILED);
  expect_at("free", m, INVALID);
  A_FREE(m);
}
/* another allocator's block: glibc's own malloc behind the override, or
 * the system's (or the sanitizer's) malloc beside libnalloc_np */
static void bad_other_heap(void) {
#ifdef NALLOC_TEST_PREFIXED
  void *p = malloc(200);
#else
  void *(*gm)(size_t) = (void *(*)(size_t))dlvsym(RTLD_NEXT, "malloc", "GLIBC_2.2.5");
  CHECK(gm != NULL);
  void *p = gm(200);
#endif
  CHECK(p != NULL);
  expect_at("free", p, INVALID);
  A_FREE(p);
}
static void bad_realloc_stack(void) {
  char buf[64] __attribute__((aligned(16)));
  void *volatile p = buf;
  expect_at("realloc", p, INVALID);
  void *r = A_REALLOC(p, 100);
  (void)r;
}
static void bad_usable_static(void) {
  expect_at("malloc_usable_size", static_buf, INVALID);
  volatile size_t n = A_USABLE(static_buf);
  (void)n;
}
static void bad_usable_interior(void) {
  char *p = A_MALLOC(48);
  expect_at("malloc_usable_size", p + 16, INVALID);
  volatile size_t n = A_USABLE(p + 16);
  (void)n;
}

/* ---- writes where the program has no business ---- */
#define TARGET ((uintptr_t)static_buf) /* the address an attacker wants */

/* Fills n bytes at p with copies of the attacker's address. */
static void spray(void *p, size_t n) {
  uintptr_t t = TARGET;
  for (size_t o = 0; o + sizeof t <= n; o += sizeof t) memcpy((char *)p + o, &t, sizeof t);
}

static int ptr_cmp(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* N allocations of `size`: none at the target, none twice, each writable. */
static void alloc_and_check(size_t size, void *also_live) {
  enum { N = 4096 };
  static void *v[N];
  for (int i = 0; i < N; i++) {
    v[i] = A_MALLOC(size);
    CHECK(v[i] != NULL);
    CHECKF((uintptr_t)v[i] != TARGET, "malloc returned the attacker's address");
    CHECKF(v[i] != also_live, "malloc returned a live block");
    memset(v[i], 0x5a, size);
  }
  static void *sorted[N];
  memcpy(sorted, v, sizeof v);
  qsort(sorted, N, sizeof *sorted, ptr_cmp);
  for (int i = 1; i < N; i++) CHECKF(sorted[i] != sorted[i - 1], "a block handed out twice");
  for (int i = 0; i < N; i++) A_FREE(v[i]);
}

/* a 32-byte block overflowed by 4 KiB (its free neighbours' slots) */
static void overflow_free_neighbours(void) {
  char *p = A_MALLOC(32);
  spray(p, 4096);
  A_FREE(p);
  alloc_and_check(32, NULL);
}
/* overflow into a live neighbour, both freed, then allocations */
static void overflow_live_neighbour(void) {
  char *a = A_MALLOC(64), *b = A_MALLOC(64);
  CHECK(b == a + 64);
  spray(a, 128);
  A_FREE(b);
  A_FREE(a);
  alloc_and_check(64, NULL);
}
/* a write after free over the whole block, then allocations */
static void uaf_write(void) {
  void *volatile keep = A_MALLOC(128);
  char *p = A_MALLOC(128);
  A_FREE(p);
  spray(p, 128);
  alloc_and_check(128, keep);
}
/* a write after free of a block freed by another thread */
static void uaf_write_remote(void) {
  char *p = A_MALLOC(256);
  free_in_thread(p);
  spray(p, 256);
  alloc_and_check(256, NULL);
}

static const hcase_t cases[] = {
    {"`free(p); free(p)`", df_aa, ABORT, "free", DOUBLE, NULL, NULL, NULL},
    {"`free(a); free(b); free(a)`", df_aba, ABORT, "free", DOUBLE, NULL, NULL, NULL},
    {"`free(a); free(b); free(b)`", df_abba, ABORT, "free", DOUBLE, NULL, NULL, NULL},
    {"`free(a)`, `thread.tcache.flush`, `free(b); free(a)`", df_flushed, ABORT, "free", DOUBLE, NULL, NULL, NULL},
    {"`free(p)` by its thread, then by another", df_owner_other, ABORT, "free", DOUBLE, NULL, NULL, NULL},
    {"`free(p)` by another thread, then by its own", df_other_owner, ABORT, "free", DOUBLE, NULL, NULL, NULL},
    {"`free(p)` by two other threads", df_other_other, ABORT, "free", DOUBLE, NULL, NULL, NULL},
    {"`free(p)` twice after its thread exited", df_exited, ABORT, "free", DOUBLE, NULL, NULL, NULL},
    {"`free(p); realloc(p, 24)`", df_realloc, ABORT, "realloc", DOUBLE, NULL, NULL, NULL},
    {"`free(p); malloc_usable_size(p)`", df_usable, ABORT, "malloc_usable_size", DOUBLE, NULL, NULL, NULL},
    {"double free of a large block (100 KiB), another freed between", df_large, ABORT, "free", INVALID, NULL, NULL, NULL},
    {"double free of `posix_memalign(&p, 8192, 100)`", df_aligned, ABORT, "free", INVALID, NULL, NULL, NULL},
    {"double free after the block's span went back to the page heap", df_span_gone, ABORT, "free",
     INVALID, DOUBLE, "`tcache:false` or above `tcache_max` (the arena's shared heap kept the span)", NULL},
    {"double free after the block was handed out again", df_reused, CONTINUE, NULL, NULL, NULL, NULL,
     "not detectable: the second `free` frees the new owner's block (as with every allocator)"},
    {"`free` of a stack address", bad_stack, ABORT, "free", INVALID, NULL, NULL, NULL},
    {"`free` of a static array + 16", bad_static, ABORT, "free", INVALID, NULL, NULL, NULL},
    {"`free(malloc(64) + 16)`", bad_interior, ABORT, "free", INVALID, NULL, NULL, NULL},
    {"`free(malloc(256 KiB) + 8 KiB)`", bad_interior_large, ABORT, "free", INVALID, NULL, NULL, NULL},
    {"`free` of a page from `mmap`", bad_mmap, ABORT, "free", INVALID, NULL, NULL, NULL},
    {"`free` of another allocator's block (glibc's)", bad_other_heap, ABORT, "free", INVALID, NULL, NULL, NULL},
    {"`realloc` of a stack address", bad_realloc_stack, ABORT, "realloc", INVALID, NULL, NULL, NULL},
    {"`malloc_usable_size` of a static array", bad_usable_static, ABORT, "malloc_usable_size", INVALID, NULL, NULL, NULL},
    {"`malloc_usable_size(malloc(48) + 16)`", bad_usable_interior, ABORT, "malloc_usable_size", INVALID, NULL, NULL, NULL},
    {"4 KiB overflow of a 32-byte block over free neighbours, `free`, 4096 `malloc(32)`",
     overflow_free_neighbours, CONTINUE, NULL, NULL, NULL, NULL,
     "no effect on nalloc: no metadata in or next to blocks, no block twice, none at a written address"},
    {"overflow into a live neighbour, both freed, 4096 `malloc(64)`", overflow_live_neighbour,
     CONTINUE, NULL, NULL, NULL, NULL, "no effect on nalloc (the neighbour's data is the program's loss)"},
    {"write after free (an address sprayed over the block), 4096 `malloc(128)`", uaf_write, CONTINUE,
     NULL, NULL, NULL, NULL, "no effect on nalloc: `malloc` never returns an address written into a free block"},
    {"write after another thread's free, 4096 `malloc(256)`", uaf_write_remote, CONTINUE, NULL,
     NULL, NULL, NULL, "no effect on nalloc: `malloc` never returns an address written into a free block"},
};
#define NCASES (sizeof cases / sizeof cases[0])

/* The markdown table, one row per case. */
static size_t table_md(char *buf, size_t cap) {
  size_t o = 0;
  o += (size_t)snprintf(buf + o, cap - o, "| misuse | nalloc's outcome |\n|---|---|\n");
  for (size_t i = 0; i < NCASES && o < cap; i++) {
    const hcase_t *c = &cases[i];
    if (c->expect == ABORT && c->alt)
      o += (size_t)snprintf(buf + o, cap - o,
                            "| %s | abort: `<nalloc>: %s(0x...): %s`; with %s: `%s` |\n",
                            c->misuse, c->call, c->what, c->alt_when, c->alt);
    else if (c->expect == ABORT)
      o += (size_t)snprintf(buf + o, cap - o, "| %s | abort: `<nalloc>: %s(0x...): %s` |\n",
                            c->misuse, c->call, c->what);
    else
      o += (size_t)snprintf(buf + o, cap - o, "| %s | process continues: %s |\n", c->misuse,
                            c->note);
  }
  return o;
}

#define BEGIN_MARK "<!-- hardening-table begin: generated by `hardening --table-md`, checked by ctest -->\n"
#define END_MARK "<!-- hardening-table end -->"

static int check_readme(const char *path) {
  FILE *f = fopen(path, "r");
  CHECKF(f != NULL, "cannot open %s", path);
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  const char *b = strstr(text, BEGIN_MARK), *e = b ? strstr(b, END_MARK) : NULL;
  CHECKF(b && e, "%s has no section between \"%.40s...\" and \"%s\"", path, BEGIN_MARK, END_MARK);
  b += strlen(BEGIN_MARK);
  static char table[1 << 16];
  size_t tl = table_md(table, sizeof table);
  if ((size_t)(e - b) != tl || memcmp(b, table, tl) != 0) {
    fprintf(stderr, "%s: the hardening table differs from `hardening --table-md`; "
            "it should read:\n%s", path, table);
    return 1;
  }
  printf("%s: the hardening table matches (%zu cases)\n", path, NCASES);
  return 0;
}

static int run_case(const hcase_t *c) {
  want[0] = 0;
  char err[8192];
  int st = check_in_child(c->fn, 30, 0, err, sizeof err);
  size_t n = strlen(err);
  const char *why = NULL;
  if (c->expect == ABORT) {
    char line[300];
    snprintf(line, sizeof line, "<nalloc>: %s\n", want);
    if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT)) why = "want death by SIGABRT";
    else if (want[0] == 0 || strncmp(want, c->call, strlen(c->call)) != 0 ||
             strstr(want, c->what) == NULL)
      why = "the case did not set its message";
    else if (strstr(err, line) == NULL) {
      /* the alternative: the same call and pointer, the other text */
      size_t head = (size_t)(strstr(want, "): ") - want) + 3;
      snprintf(line, sizeof line, "<nalloc>: %.*s%s\n", (int)head, want, c->alt ? c->alt : "");
      if (c->alt == NULL || strstr(err, line) == NULL) why = "the message is not the expected one";
    }
  } else if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) || n != 0) {
    why = "want exit 0 and nothing on stderr";
  }
  if (why) {
    fprintf(stderr, "FAIL %s: %s (expected \"%s\"); got %s %d; stderr: %s\n", c->misuse, why,
            want, WIFEXITED(st) ? "exit status" : "signal",
            WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), err);
    return 1;
  }
  fprintf(stderr, "ok %s: %s\n", c->misuse, c->expect == ABORT ? want : "continues");
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--table-md") == 0) {
    static char table[1 << 16];
    fwrite(table, 1, table_md(table, sizeof table), stdout);
    return 0;
  }
  if (argc > 2 && strcmp(argv[1], "--check-readme") == 0) return check_readme(argv[2]);
  want = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(want != MAP_FAILED);
  fprintf(stderr, "hardening: %s\n", A_MODE);
  int fails = 0;
  for (size_t i = 0; i < NCASES; i++) fails += run_case(&cases[i]);
  CHECKF(fails == 0, "%d of %zu cases did not have the documented outcome", fails, NCASES);
  printf("hardening: %zu cases ok\n", NCASES);
  return 0;
}
