/* prof_unwind_cmp.c -- prof_unwind:dwarf must record exactly the stacks
 * prof_unwind:libunwind records. The dwarf walker caches CFA rules per
 * return address and hands frames it cannot express to libunwind, so the
 * way to catch a wrong rule, a stale cache entry or a bad hand-over is to
 * profile the same program with both unwinders and compare.
 *
 * `prof_unwind_cmp --child UNWIND FILE` allocates (exact mode, so every
 * allocation is recorded) from many kinds of stacks, each site with its
 * own request size, keeps most objects live, frees some, and dumps:
 *  - recursion 1..40 deep, 1..8 deep through prof_unwind_cmp_nofp.c,
 *    and 129..160 deep (cut at prof_depth) in an order that makes the
 *    dwarf walker's suffix cache meet a cut walk from below and above;
 *  - for the suffix cache (a walk that reaches a frame of the thread's
 *    last walk in the same state takes the outer frames from it): one
 *    chain of fp and no-fp frames, of varying depth, called alternately
 *    from two middle functions with the same frame (with and without
 *    frame pointers), so that the chain's frames recur at the same rsp
 *    with the same return addresses while a word further out differs;
 *    and a frame with an rbp-based CFA reached at the same rsp and
 *    return address with another rbp, the words at both rbps the same;
 *    the same chain 75 and 96 frames deep under two middle functions,
 *    whose replay records keep their innermost words and count on the
 *    suffix cache for the rest;
 *  - alloca / VLA frames, here and in the -fomit-frame-pointer file (a
 *    rbp-based CFA among rsp-based ones), a big stack frame, a tail call,
 *    a call to a noreturn function that is its caller's last instruction,
 *    pushed stack arguments, stack realignment (with the CFA as a DWARF
 *    expression), garbage in rbp, a function without unwind info
 *    (hand-written assembly: libunwind finds its frame through rbp), and
 *    twin stacks that reach malloc from the same call site with the same
 *    rsp and rbp and differ only further up;
 *  - libc code without frame pointers: comparators of qsort, bsearch and
 *    tsearch that allocate, strdup (malloc called from libc), tsearch's
 *    nodes and qsort's buffer (ditto);
 *  - calls through function pointers; malloc, calloc, realloc,
 *    reallocarray, posix_memalign, aligned_alloc, memalign, valloc;
 *  - the same again from a second thread (its own sizes; not the
 *    150-deep stack, which prof_depth cuts to the same frames there);
 *  - signal handlers that allocate (raise: the stack goes through the
 *    kernel's signal frame), one of them on a sigaltstack.
 *
 * `prof_unwind_cmp [--expect-differ] [REF CAND]` (default: libunwind
 * dwarf) runs the child once per unwinder, maps every frame to (mapping,
 * offset from the mapping's load base) with the MAPPED_LIBRARIES section
 * of the same dump (ASLR moves everything between runs), and compares the
 * records (stack, live objects and bytes, allocated objects and bytes):
 * they must be the same multiset. Before that, the REF run must show every
 * site with the frames it must have (the named functions down to main or
 * the thread's start, the libc frames of the qsort/bsearch/tsearch/strdup/
 * signal stacks), so that two equally truncated walks cannot pass.
 * With --expect-differ the test passes only if the profiles differ on the
 * qsort comparator's stacks: `--expect-differ libunwind fp` shows that the
 * comparison notices frames lost in libc. An unwinder the library does not
 * know is a failure (the child checks opt.prof_unwind). */
#include "prof_check.h"

#include <alloca.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <search.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef NALLOC_TEST_PREFIXED
#define t_aligned_alloc nalloc_aligned_alloc
#define t_memalign nalloc_memalign
#define t_valloc nalloc_valloc
#define t_reallocarray nalloc_reallocarray
#define MALLOC_SYM "nalloc_malloc"
#else
#define t_aligned_alloc aligned_alloc
#define t_memalign memalign
#define t_valloc valloc
#define t_reallocarray reallocarray
#define MALLOC_SYM "malloc"
#endif

extern char **environ;

/* ---- the sites ---------------------------------------------------------- */

enum {
  S_REC = 0,           /* rec, 1..40 frames deep */
  S_MIX = S_REC + 40,  /* rec_mix <-> nofp_rec, 1..8 rec_mix frames */
  S_DEEP = S_MIX + 8,  /* rec, 150 frames deep */
  S_MALLOC,
  S_CALLOC,
  S_REALLOC_FROM,
  S_REALLOC_TO,
  S_REALLOCARRAY,
  S_MEMALIGN,
  S_ALIGNED,
  S_MEMALIGN_OLD,
  S_VALLOC,
  S_FP_VLA,
  S_FP_ALLOCA,
  S_NOFP_LEAF,
  S_NOFP_BIG,
  S_NOFP_CHAIN,
  S_NOFP_TAIL,
  S_NOFP_ALLOCA,
  S_NOFP_VLA,
  S_NOFP_DIE,
  S_NOFP_PUSH,
  S_NOFP_REALIGN,
  S_NOFP_DRAP,
  S_NOFP_RBP,
  S_NOCFI,
  S_TWIN_A,
  S_TWIN_B,
  S_NOFP_TWIN_A,
  S_NOFP_TWIN_B,
  S_PTR_A,
  S_PTR_B,
  S_PTR_NOFP,
  S_PTR_BIG,
  S_QSORT,
  S_BSEARCH,
  S_TSEARCH,
  S_STRDUP,
  S_SIG,
  S_SIG_NOFP,
  S_ALTSIG,
  S_SFX_A,
  S_SFX_B,
  S_NOFP_SFX_A,
  S_NOFP_SFX_B,
  S_SFX_VLA,
  S_SFX_VLA_W,
  S_DSFX_A50, /* dsfx_top -> dsfx_mid_a/b -> sfx_chain 50 or 64 deep */
  S_DSFX_A64,
  S_DSFX_B50,
  S_DSFX_B64,
  S_N
};
#define REC_MAX 40
#define MIX_MAX 8
#define DEEP 150
/* Request size of a site: odd, and different in the second thread
 * (1 vs 9 mod 16), so every stack of interest is found by its size. */
#define SZ(id) ((size_t)4001 + 16 * (size_t)(id))
#define TOFF 8

typedef struct {
  int id;
  const char *fn[5]; /* these frames in this order, leaf first */
  const char *absent; /* and not this one */
  bool libc;          /* a frame in libc */
  bool libc0;         /* frame 0 in libc */
} site_t;

static const site_t sites[] = {
    {S_MALLOC, {"site_malloc", "run_all"}, NULL, false, false},
    {S_CALLOC, {"site_calloc", "run_all"}, NULL, false, false},
    {S_REALLOC_FROM, {"site_realloc_from", "run_all"}, NULL, false, false},
    {S_REALLOC_TO, {"site_realloc_to", "run_all"}, NULL, false, false},
    {S_REALLOCARRAY, {"site_reallocarray", "run_all"}, NULL, false, false},
    {S_MEMALIGN, {"site_memalign", "run_all"}, NULL, false, false},
    {S_ALIGNED, {"site_aligned", "run_all"}, NULL, false, false},
    {S_MEMALIGN_OLD, {"site_memalign_old", "run_all"}, NULL, false, false},
    {S_VALLOC, {"site_valloc", "run_all"}, NULL, false, false},
    {S_FP_VLA, {"site_vla", "run_all"}, NULL, false, false},
    {S_FP_ALLOCA, {"site_alloca", "run_all"}, NULL, false, false},
    {S_NOFP_LEAF, {"nofp_leaf", "run_all"}, NULL, false, false},
    {S_NOFP_BIG, {"nofp_big", "run_all"}, NULL, false, false},
    {S_NOFP_CHAIN, {"nofp_chain1", "nofp_chain2", "nofp_chain3", "run_all"}, NULL, false, false},
    {S_NOFP_TAIL, {"site_tail", "run_all"}, "nofp_tail", false, false},
    {S_NOFP_ALLOCA, {"nofp_alloca", "run_all"}, NULL, false, false},
    {S_NOFP_VLA, {"nofp_vla", "run_all"}, NULL, false, false},
    {S_NOFP_DIE, {"nofp_die", "nofp_calls_die", "site_die", "run_all"}, NULL, false, false},
    {S_NOFP_PUSH, {"nofp_many", "nofp_push_args", "run_all"}, NULL, false, false},
    {S_NOFP_REALIGN, {"nofp_realign", "run_all"}, NULL, false, false},
    {S_NOFP_DRAP, {"nofp_realign_args", "nofp_call_realign_args", "run_all"}, NULL, false, false},
    {S_NOFP_RBP, {"nofp_clobber_rbp", "run_all"}, NULL, false, false},
    {S_NOCFI, {"nocfi_alloc", "site_nocfi", "run_all"}, NULL, false, false},
    {S_TWIN_A, {"twin_leaf", "twin_mid", "twin_a", "run_all"}, NULL, false, false},
    {S_TWIN_B, {"twin_leaf", "twin_mid", "twin_b", "run_all"}, NULL, false, false},
    {S_NOFP_TWIN_A, {"nofp_leaf", "nofp_twin_mid", "nofp_twin_a", "run_all"}, NULL, false, false},
    {S_NOFP_TWIN_B, {"nofp_leaf", "nofp_twin_mid", "nofp_twin_b", "run_all"}, NULL, false, false},
    {S_PTR_A, {"ptr_a", "site_ptrs", "run_all"}, NULL, false, false},
    {S_PTR_B, {"ptr_b", "site_ptrs", "run_all"}, NULL, false, false},
    {S_PTR_NOFP, {"nofp_leaf", "site_ptrs", "run_all"}, NULL, false, false},
    {S_PTR_BIG, {"nofp_big", "site_ptrs", "run_all"}, NULL, false, false},
    {S_QSORT, {"cmp_qsort", "site_qsort", "run_all"}, NULL, true, false},
    {S_BSEARCH, {"nofp_cmp_alloc", "site_bsearch", "run_all"}, NULL, true, false},
    {S_TSEARCH, {"cmp_tsearch", "site_tsearch", "run_all"}, NULL, true, false},
#ifndef NALLOC_TEST_PREFIXED /* strdup calls libc's malloc there */
    {S_STRDUP, {"site_strdup", "run_all"}, NULL, true, true},
#endif
    {S_SIG, {"on_sig", "sig_raiser", "run_all"}, NULL, true, false},
    {S_SIG_NOFP, {"nofp_leaf", "on_sig", "sig_raiser", "run_all"}, NULL, true, false},
    {S_ALTSIG, {"on_altsig", "altsig_raiser", "run_all"}, NULL, true, false},
    {S_SFX_A, {"sfx_leaf", "sfx_chain", "sfx_mid_a", "sfx_top", "run_all"}, "sfx_mid_b", false, false},
    {S_SFX_B, {"sfx_leaf", "sfx_chain", "sfx_mid_b", "sfx_top", "run_all"}, "sfx_mid_a", false, false},
    {S_NOFP_SFX_A, {"sfx_leaf", "sfx_chain", "nofp_sfx_mid_a", "sfx_top", "run_all"}, "nofp_sfx_mid_b", false, false},
    {S_NOFP_SFX_B, {"sfx_leaf", "sfx_chain", "nofp_sfx_mid_b", "sfx_top", "run_all"}, "nofp_sfx_mid_a", false, false},
    {S_SFX_VLA, {"sfx_vla_leaf", "sfx_vla", "sfx_vla_top", "run_all"}, "sfx_vla_w", false, false},
    {S_SFX_VLA_W, {"sfx_vla_leaf", "sfx_vla", "sfx_vla_w", "sfx_vla_top", "run_all"}, NULL, false, false},
    {S_DSFX_A50, {"sfx_leaf", "sfx_chain", "dsfx_mid_a", "dsfx_top", "run_all"}, "dsfx_mid_b", false, false},
    {S_DSFX_A64, {"sfx_leaf", "sfx_chain", "dsfx_mid_a", "dsfx_top", "run_all"}, "dsfx_mid_b", false, false},
    {S_DSFX_B50, {"sfx_leaf", "sfx_chain", "dsfx_mid_b", "dsfx_top", "run_all"}, "dsfx_mid_a", false, false},
    {S_DSFX_B64, {"sfx_leaf", "sfx_chain", "dsfx_mid_b", "dsfx_top", "run_all"}, "dsfx_mid_a", false, false},
};
#define NSITES (sizeof sites / sizeof sites[0])

/* ---- the child: allocations from many stacks --------------------------- */

/* In prof_unwind_cmp_nofp.c (-O2 -fomit-frame-pointer). */
void nofp_leaf(size_t n);
void nofp_big(size_t n);
void nofp_chain3(size_t n);
void *nofp_tail(size_t n);
void nofp_alloca(size_t n, size_t k);
void nofp_vla(size_t n, size_t k);
void nofp_calls_die(size_t n, jmp_buf *jb);
void nofp_after_die(void);
void nofp_rec(int k, size_t n, void (*back)(int, size_t));
void nofp_push_args(size_t n);
void nofp_realign(size_t n);
void nofp_call_realign_args(size_t n);
void nofp_clobber_rbp(size_t n);
void nofp_twin_a(size_t n);
void nofp_twin_b(size_t n);
int nofp_cmp_alloc(const void *a, const void *b);
extern size_t nofp_cmp_size;
void nofp_sfx_mid_a(int k, size_t n, void (*chain)(int, size_t));
void nofp_sfx_mid_b(int k, size_t n, void (*chain)(int, size_t));

#define KEEP_MAX 8192
static void *kept[KEEP_MAX];
static int nkept;
void cmp_keep(void *p) {
  CHECK(p != NULL && nkept < KEEP_MAX);
  kept[nkept++] = p;
}

NOINL void rec(int k, size_t n) {
  if (k <= 1) cmp_keep(t_malloc(n));
  else rec(k - 1, n);
  __asm__ volatile("");
}
NOINL void rec_mix(int k, size_t n) {
  if (k <= 1) cmp_keep(t_malloc(n));
  else nofp_rec(k - 1, n, rec_mix);
  __asm__ volatile("");
}

NOINL void site_malloc(size_t n) { cmp_keep(t_malloc(n)); }
NOINL void site_calloc(size_t n) { cmp_keep(t_calloc(n, 1)); }
static void *moving;
NOINL void site_realloc_from(size_t n) { moving = t_malloc(n); }
NOINL void site_realloc_to(size_t n) {
  moving = t_realloc(moving, n);
  cmp_keep(moving);
}
NOINL void site_memalign(size_t n) {
  void *p = NULL;
  CHECK(t_posix_memalign(&p, 128, n) == 0);
  cmp_keep(p);
}
NOINL void site_aligned(size_t n) { cmp_keep(t_aligned_alloc(256, n)); }
NOINL void site_memalign_old(size_t n) { cmp_keep(t_memalign(512, n)); }
NOINL void site_valloc(size_t n) { cmp_keep(t_valloc(n)); }
NOINL void site_reallocarray(size_t n) { cmp_keep(t_reallocarray(NULL, 1, n)); }
NOINL void site_vla(size_t n, size_t k) {
  char buf[k];
  memset(buf, 2, k);
  cmp_keep(t_malloc(n));
  __asm__ volatile("" : : "r"(buf) : "memory");
}
NOINL void site_alloca(size_t n, size_t k) {
  char *buf = alloca(k);
  memset(buf, 3, k);
  cmp_keep(t_malloc(n));
  __asm__ volatile("" : : "r"(buf) : "memory");
}
NOINL void site_tail(size_t n) {
  cmp_keep(nofp_tail(n));
  __asm__ volatile("");
}
NOINL void site_die(size_t n) {
  jmp_buf jb;
  if (setjmp(jb) == 0) nofp_calls_die(n, &jb);
}

/* malloc(n) from a function without CFI (no .cfi_startproc): the dwarf
 * walker must hand such a stack to libunwind, which follows rbp. */
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl nocfi_alloc\n"
        ".type nocfi_alloc, @function\n"
        "nocfi_alloc:\n"
        "  push %rbp\n"
        "  mov %rsp, %rbp\n"
        "  call " MALLOC_SYM "@PLT\n"
        "  pop %rbp\n"
        "  ret\n"
        ".size nocfi_alloc, .-nocfi_alloc\n");
void *nocfi_alloc(size_t n);
#else
NOINL void *nocfi_alloc(size_t n) { return t_malloc(n); }
#endif
NOINL void site_nocfi(size_t n) {
  cmp_keep(nocfi_alloc(n));
  __asm__ volatile("");
}

/* Twins: twin_leaf calls malloc from the same place with the same rsp and
 * rbp under twin_a and under twin_b (the same frames): a walker that
 * remembers stacks by (call site, rsp, rbp) must look further up. */
NOINL void twin_leaf(size_t n) {
  cmp_keep(t_malloc(n));
  __asm__ volatile("");
}
NOINL void twin_mid(size_t n) {
  twin_leaf(n);
  __asm__ volatile("");
}
NOINL void twin_a(size_t n) {
  twin_mid(n);
  __asm__ volatile("");
}
NOINL void twin_b(size_t n) {
  twin_mid(n);
  __asm__ volatile("");
}

static _Thread_local size_t base; /* 0, or TOFF in the second thread */
NOINL void ptr_a(size_t n) { cmp_keep(t_malloc(n)); }
NOINL void ptr_b(size_t n) { cmp_keep(t_malloc(n)); }
NOINL void site_ptrs(void) {
  static void (*const fns[])(size_t) = {ptr_a, ptr_b, nofp_leaf, nofp_big};
  static const int ids[] = {S_PTR_A, S_PTR_B, S_PTR_NOFP, S_PTR_BIG};
  for (int i = 0; i < 4; i++) {
    void (*volatile f)(size_t) = fns[i];
    f(SZ(ids[i]) + base);
  }
}

static unsigned cmp_calls;
NOINL int cmp_qsort(const void *a, const void *b) {
  void *p = t_malloc(SZ(S_QSORT) + base);
  if (cmp_calls++ % 16 == 0) cmp_keep(p);
  else t_free(p);
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}
NOINL int cmp_tsearch(const void *a, const void *b) {
  void *p = t_malloc(SZ(S_TSEARCH) + base);
  if (cmp_calls++ % 8 == 0) cmp_keep(p);
  else t_free(p);
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

#define NSORT 300 /* 1200 bytes: glibc's qsort mallocs its buffer */
static _Thread_local int sorted[NSORT];
NOINL void site_qsort(void) {
  unsigned x = 12345;
  for (int i = 0; i < NSORT; i++) sorted[i] = (int)((x = x * 1103515245 + 12345) >> 8);
  cmp_calls = 0;
  qsort(sorted, NSORT, sizeof sorted[0], cmp_qsort);
}
NOINL void site_bsearch(void) {
  nofp_cmp_size = SZ(S_BSEARCH) + base;
  for (int i = 0; i < NSORT; i += 37) CHECK(bsearch(&sorted[i], sorted, NSORT, sizeof sorted[0], nofp_cmp_alloc));
}
static int tkeys[2][64];
static void *troots[2]; /* the trees stay, reachable (LeakSanitizer) */
NOINL void site_tsearch(void) {
  int t = base != 0;
  cmp_calls = 0;
  for (int i = 0; i < 64; i++) {
    tkeys[t][i] = (i * 37) % 64;
    CHECK(tsearch(&tkeys[t][i], &troots[t], cmp_tsearch)); /* nodes stay live */
  }
}
#ifndef NALLOC_TEST_PREFIXED
NOINL void site_strdup(size_t n) {
  char *s = t_malloc(n + 100);
  memset(s, 'x', n - 1);
  s[n - 1] = 0;
  cmp_keep(strdup(s)); /* malloc(n), called by libc */
  t_free(s);
}
#endif

void on_sig(int sig) {
  (void)sig;
  cmp_keep(t_malloc(SZ(S_SIG) + base));
  nofp_leaf(SZ(S_SIG_NOFP) + base);
}
void on_altsig(int sig) {
  (void)sig;
  cmp_keep(t_malloc(SZ(S_ALTSIG) + base));
}
NOINL void sig_raiser(void) {
  CHECK(raise(SIGUSR1) == 0);
  __asm__ volatile("");
}
NOINL void altsig_raiser(void) {
  CHECK(raise(SIGUSR2) == 0);
  __asm__ volatile("");
}

/* The suffix cache's shapes. sfx_chain's frames (fp ones, and no-fp
 * nofp_rec ones between) lie at the same rsp with the same return
 * addresses under sfx_mid_a and sfx_mid_b (the same frame: the walker's
 * cached state matches at each of them), and the chain is walked again
 * at depths that change every call, so the thread's recent walks (kept
 * by call site and rsp) seldom know the stack and the suffix cache is
 * what answers. sfx_top calls the middle functions from one call site,
 * so only the word that returns into sfx_mid_a or sfx_mid_b (or their
 * no-fp twins) tells the stacks apart. */
static volatile int sfx_which;
static unsigned sfx_calls;
NOINL void sfx_leaf(size_t n) {
  void *p = t_malloc(n);
  if (sfx_calls++ % 8 == 0) cmp_keep(p);
  else t_free(p);
  __asm__ volatile("");
}
NOINL void sfx_chain(int k, size_t n) {
  if (k <= 1) sfx_leaf(n);
  else if (k & 1) nofp_rec(k - 1, n, sfx_chain);
  else sfx_chain(k - 1, n);
  __asm__ volatile("");
}
NOINL void sfx_mid_a(int k, size_t n, void (*chain)(int, size_t)) {
  sfx_which = 1;
  chain(k, n);
  __asm__ volatile("");
}
NOINL void sfx_mid_b(int k, size_t n, void (*chain)(int, size_t)) {
  sfx_which = 2;
  chain(k, n);
  __asm__ volatile("");
}
NOINL void sfx_top(void) {
  typedef void (*mid_fn)(int, size_t, void (*)(int, size_t));
  static const mid_fn mids[] = {sfx_mid_a, sfx_mid_b, nofp_sfx_mid_a, nofp_sfx_mid_b};
  static const int ids[] = {S_SFX_A, S_SFX_B, S_NOFP_SFX_A, S_NOFP_SFX_B};
  for (int i = 0; i < 192; i++) {
    /* runs of even depths and of odd ones: the frames of two depths of
     * one parity differ first near the leaf, so walks meet the cached
     * chain at every one of its frames, the outermost included */
    int k = 2 + 2 * ((i * 5) % 11) + (i / 11) % 2;
    int m = (i + i / 4) % 4;
    mid_fn volatile f = mids[m]; /* one call site: the frames above the
                                    middle one are the same words */
    f(k, SZ(ids[m]) + base, sfx_chain);
  }
  __asm__ volatile("");
}

/* Replays of walks deeper than a replay record's 64 words: such a record
 * keeps its innermost words and counts on a frame of the suffix cache for
 * the rest (while no walk rewrote that frame). sfx_chain 50 and 64 deep
 * (75 and 96 frames: sfx_chain and no-fp nofp_rec ones, under prof_depth)
 * under dsfx_mid_a or dsfx_mid_b, which dsfx_top calls from one call site
 * with the same frame: the two depths share their outer frames, so a walk
 * of one joins the other's suffix near the leaf and leaves the outer
 * frames (and the records that count on them) as they were, and a record
 * of one middle function is tried against the other's stack, whose words
 * differ only in the return address into the middle function, 75-96
 * frames out. The order visits every pair of the four stacks one after
 * the other. */
NOINL void dsfx_mid_a(int k, size_t n, void (*chain)(int, size_t)) {
  sfx_which = 3;
  chain(k, n);
  __asm__ volatile("");
}
NOINL void dsfx_mid_b(int k, size_t n, void (*chain)(int, size_t)) {
  sfx_which = 4;
  chain(k, n);
  __asm__ volatile("");
}
NOINL void dsfx_top(void) {
  typedef void (*mid_fn)(int, size_t, void (*)(int, size_t));
  static const mid_fn mids[] = {dsfx_mid_a, dsfx_mid_b};
  static const int ids[2][2] = {{S_DSFX_A50, S_DSFX_A64}, {S_DSFX_B50, S_DSFX_B64}};
  /* (middle, depth): A50 A64 B64 A50 B50 B64 A64 A50 B50 A64 B50 ... */
  static const unsigned char seq[] = {0, 1, 3, 0, 2, 3, 1, 0, 2, 1, 2, 0, 3, 2, 1, 3};
  for (int i = 0; i < 96; i++) {
    unsigned m = seq[i % 16] >> 1, d = seq[i % 16] & 1;
    mid_fn volatile f = mids[m]; /* one call site */
    f(d ? 64 : 50, SZ(ids[m][d]) + base, sfx_chain);
  }
  __asm__ volatile("");
}

/* The same rsp and return address with another rbp: sfx_vla sizes its
 * VLA so that its rsp is the same whether sfx_vla_top calls it directly
 * or through sfx_vla_w (one call site), so sfx_vla_leaf's frame and
 * sfx_vla's recur at the same rsp; sfx_vla's CFA is rbp-based and its rbp
 * differs by sfx_vla_w's frame, under which lie the same two words
 * (caller's rbp, return into sfx_vla_top) the direct call's rbp pointed
 * at. Only the rbp tells the stacks apart: a cached frame is reused only
 * with the rbp it had when a rule further out reads it. */
static uintptr_t sfx_vla_end;
NOINL void sfx_vla_leaf(size_t n) {
  cmp_keep(t_malloc(n));
  __asm__ volatile("");
}
NOINL void sfx_vla(size_t n) {
  uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
  if (sfx_vla_end == 0) sfx_vla_end = (fp - 4096) & ~(uintptr_t)15;
  char buf[fp - sfx_vla_end]; /* rsp ends at the same place */
  buf[0] = 1;
  sfx_vla_leaf(n);
  __asm__ volatile("" : : "r"(buf) : "memory");
}
NOINL void sfx_vla_w(size_t n) {
  sfx_vla(n);
  __asm__ volatile("");
}
NOINL void sfx_vla_top(void) {
  static void (*const fns[])(size_t) = {sfx_vla, sfx_vla_w};
  static const int ids[] = {S_SFX_VLA, S_SFX_VLA_W};
  for (int i = 0; i < 4; i++) {
    void (*volatile f)(size_t) = fns[i % 2];
    f(SZ(ids[i % 2]) + base);
  }
  __asm__ volatile("");
}

/* PROF_UNWIND_CMP_SIG_FIRST set: the first stack the DWARF rules hand to
 * libunwind is a signal handler's, taken while a second thread exists, so
 * libunwind is loaded on demand by nalloc's loader thread while the
 * handler's malloc waits (prof_bt.c, bt_unw_get). */
static bool sig_first;

NOINL void run_all(void) {
  if (sig_first && base == 0) sig_raiser();
  for (int d = 1; d <= REC_MAX; d++) rec(d, SZ(S_REC + d - 1) + base);
  for (int d = 1; d <= MIX_MAX; d++) rec_mix(d, SZ(S_MIX + d - 1) + base);
  /* Cut at prof_depth, the stack has only rec frames: the same stack in
   * both threads. So only in the first. */
  if (base == 0) {
    /* deeper, shallower, and again: the cut walk cached, then met by
     * walks that would need frames beyond its cut and by deeper ones */
    static const int deep[] = {DEEP, DEEP + 1, DEEP - 1, DEEP + 10, DEEP - 10, 129, 135, DEEP};
    for (size_t j = 0; j < sizeof deep / sizeof deep[0]; j++) rec(deep[j], SZ(S_DEEP));
  }
  sfx_top();
  dsfx_top();
  sfx_vla_end = 0;
  sfx_vla_top();
  for (int i = 0; i < 3; i++) { /* three objects per stack */
    site_malloc(SZ(S_MALLOC) + base);
    site_calloc(SZ(S_CALLOC) + base);
    site_realloc_from(SZ(S_REALLOC_FROM) + base);
    site_realloc_to(SZ(S_REALLOC_TO) + base);
    site_reallocarray(SZ(S_REALLOCARRAY) + base);
    site_memalign(SZ(S_MEMALIGN) + base);
    site_aligned(SZ(S_ALIGNED) + base);
    site_memalign_old(SZ(S_MEMALIGN_OLD) + base);
    site_valloc(SZ(S_VALLOC) + base);
    site_vla(SZ(S_FP_VLA) + base, 100 + (size_t)i * 333);
    site_alloca(SZ(S_FP_ALLOCA) + base, 77 + (size_t)i * 1001);
    nofp_leaf(SZ(S_NOFP_LEAF) + base);
    nofp_big(SZ(S_NOFP_BIG) + base);
    nofp_chain3(SZ(S_NOFP_CHAIN) + base);
    site_tail(SZ(S_NOFP_TAIL) + base);
    nofp_alloca(SZ(S_NOFP_ALLOCA) + base, 55 + (size_t)i * 999);
    nofp_vla(SZ(S_NOFP_VLA) + base, 33 + (size_t)i * 777);
    site_die(SZ(S_NOFP_DIE) + base);
    nofp_push_args(SZ(S_NOFP_PUSH) + base);
    nofp_realign(SZ(S_NOFP_REALIGN) + base);
    nofp_call_realign_args(SZ(S_NOFP_DRAP) + base);
    nofp_clobber_rbp(SZ(S_NOFP_RBP) + base);
    site_nocfi(SZ(S_NOCFI) + base);
    twin_a(SZ(S_TWIN_A) + base);
    twin_b(SZ(S_TWIN_B) + base);
    nofp_twin_a(SZ(S_NOFP_TWIN_A) + base);
    nofp_twin_b(SZ(S_NOFP_TWIN_B) + base);
    site_ptrs();
#ifndef NALLOC_TEST_PREFIXED
    site_strdup(SZ(S_STRDUP) + base);
#endif
  }
  site_qsort();
  site_bsearch();
  site_tsearch();
  sig_raiser();

  stack_t ss = {0}, old;
  ss.ss_size = 1 << 16;
  ss.ss_sp = mmap(NULL, ss.ss_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(ss.ss_sp != MAP_FAILED);
  CHECK(sigaltstack(&ss, &old) == 0);
  altsig_raiser();
  ss.ss_flags = SS_DISABLE;
  CHECK(sigaltstack(&ss, NULL) == 0);
  CHECK(munmap(ss.ss_sp, ss.ss_size) == 0);
}

void *thread_main(void *arg) {
  (void)arg;
  base = TOFF;
  run_all();
  __asm__ volatile("");
  return NULL;
}

/* Is libunwind mapped? Read from /proc/self/maps without allocating:
 * the profile of both runs must hold the same allocations. */
static bool unw_mapped(void) {
  static char maps[1 << 20];
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  CHECK(fd >= 0);
  size_t n = 0;
  ssize_t r;
  while (n < sizeof maps - 1 && (r = read(fd, maps + n, sizeof maps - 1 - n)) != 0) {
    CHECK(r > 0 || errno == EINTR);
    if (r > 0) n += (size_t)r;
  }
  close(fd);
  maps[n] = '\0';
  return strstr(maps, "/libunwind.so.8") != NULL;
}

/* A thread that only waits, so that the process is not single-threaded. */
static int park_fd[2];
static void *park_main(void *arg) {
  (void)arg;
  char c;
  while (read(park_fd[0], &c, 1) < 0 && errno == EINTR) {
  }
  return NULL;
}

NOINL int child_main(const char *unwind, const char *path) {
  /* libunwind is loaded when the profiler starts only for
   * prof_unwind:libunwind; dwarf loads it at the first stack that needs
   * it (none yet) */
  CHECK(unw_mapped() == (strcmp(unwind, "libunwind") == 0));
  const char *got = NULL;
  size_t sz = sizeof got;
  CHECK(nalloc_ctl("opt.prof_unwind", &got, &sz, NULL, 0) == 0);
  if (strcmp(got, unwind) != 0) {
    fprintf(stderr, "prof_unwind_cmp: asked for prof_unwind:%s, the library runs %s\n",
            unwind, got);
    return 1;
  }
  size_t lg = 1;
  sz = sizeof lg;
  CHECK(nalloc_ctl("prof.lg_sample", &lg, &sz, NULL, 0) == 0);
  CHECK_EQ_U(lg, 0);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sig;
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
  sa.sa_handler = on_altsig;
  sa.sa_flags = SA_ONSTACK;
  CHECK(sigaction(SIGUSR2, &sa, NULL) == 0);

  pthread_t park;
  sig_first = getenv("PROF_UNWIND_CMP_SIG_FIRST") != NULL;
  if (sig_first) {
    /* not sampled: glibc sizes the thread's TLS vector by the modules
     * loaded, and libunwind is one of them only in the libunwind run */
    bool off = false, on = true;
    CHECK(nalloc_ctl("thread.prof.active", NULL, NULL, &off, sizeof off) == 0);
    CHECK(pipe(park_fd) == 0);
    CHECK(pthread_create(&park, NULL, park_main, NULL) == 0);
    CHECK(nalloc_ctl("thread.prof.active", NULL, NULL, &on, sizeof on) == 0);
  }
  run_all();
  /* run_all has stacks the DWARF rules cannot walk */
  if (strcmp(unwind, "fp") != 0) CHECK(unw_mapped());
  if (sig_first) {
    CHECK(close(park_fd[1]) == 0);
    CHECK(pthread_join(park, NULL) == 0);
  }
  /* Two threads one after the other: the second one's tdata is the
   * first one's, reused with only its head zeroed (prof_mem_alloc_head),
   * so its walk caches start out holding the first thread's words. */
  for (int k = 0; k < 2; k++) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_main, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
  }

  /* Free about a third, scattered over the sites (a stride would hit
   * the same sites every round). */
  for (int i = 0; i < nkept; i++)
    if ((((unsigned)i * 2654435761u) >> 8) % 3 == 0) t_free(kept[i]);
  int e = ctl_dump(path);
  if (e) {
    fprintf(stderr, "prof_unwind_cmp: prof.dump %s: %s\n", path, strerror(e));
    return 1;
  }
  __asm__ volatile("");
  return 0;
}

/* ---- the driver: parse, normalize, compare ------------------------------ */

typedef struct {
  uintptr_t lo, hi;
  char *path; /* "" for anonymous mappings */
  uintptr_t base; /* lowest start of the same path */
} map_t;
typedef struct {
  map_t *m;
  int n;
} maps_t;

/* /proc/<pid>/maps lines after `after` (NULL: from the first line). */
static maps_t maps_load(const char *file, const char *after) {
  maps_t M = {NULL, 0};
  FILE *f = fopen(file, "r");
  CHECK(f);
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  bool in = after == NULL;
  int capm = 0;
  while ((len = getline(&line, &cap, f)) >= 0) {
    if (len && line[len - 1] == '\n') line[--len] = 0;
    if (!in) {
      in = strcmp(line, after) == 0;
      continue;
    }
    unsigned long lo, hi, off;
    char perms[8];
    int pos = 0;
    if (sscanf(line, "%lx-%lx %7s %lx %*s %*s%n", &lo, &hi, perms, &off, &pos) < 4 || pos == 0)
      continue;
    const char *p = line + pos;
    while (*p == ' ') p++;
    if (M.n == capm) {
      capm = capm ? 2 * capm : 64;
      M.m = realloc(M.m, (size_t)capm * sizeof *M.m);
      CHECK(M.m);
    }
    map_t *m = &M.m[M.n++];
    m->lo = lo, m->hi = hi, m->path = strdup(p), m->base = lo;
    CHECK(m->path);
  }
  free(line);
  fclose(f);
  for (int i = 0; i < M.n; i++)
    for (int j = 0; j < M.n; j++)
      if (M.m[i].path[0] && M.m[j].lo < M.m[i].base && !strcmp(M.m[i].path, M.m[j].path))
        M.m[i].base = M.m[j].lo;
  return M;
}

/* The mapping holding the instruction before return address a. */
static const map_t *maps_find(const maps_t *M, uintptr_t a) {
  for (int i = 0; i < M->n; i++)
    if (a - 1 >= M->m[i].lo && a - 1 < M->m[i].hi) return &M->m[i];
  return NULL;
}

typedef struct {
  const char *path;
  uintptr_t off;
} frame_t;
typedef struct {
  uint64_t c[4]; /* live objects, live bytes, allocated objects, allocated bytes */
  int nf;
  frame_t *f;
  char *key;
} stk_t;
typedef struct {
  const char *unwind;
  maps_t maps;
  stk_t *s;
  int n;
} prof_t;

static int stk_cmp(const void *a, const void *b) {
  return strcmp(((const stk_t *)a)->key, ((const stk_t *)b)->key);
}

/* Every frame becomes (mapping path, address - load base); records with
 * the same normalized stack are added up. */
static prof_t prof_load(const char *file, const char *unwind) {
  prof_t R;
  memset(&R, 0, sizeof R);
  R.unwind = unwind;
  pc_prof_t P = pc_load(file);
  CHECK(strcmp(P.label, "heapprofile") == 0); /* exact mode */
  R.maps = maps_load(file, "MAPPED_LIBRARIES:");
  CHECK(R.maps.n > 0);
  R.s = calloc((size_t)P.nrec + 1, sizeof *R.s);
  CHECK(R.s);
  for (int i = 0; i < P.nrec; i++) {
    const pc_rec_t *r = &P.rec[i];
    stk_t *s = &R.s[R.n++];
    s->c[0] = r->n, s->c[1] = r->b, s->c[2] = r->an, s->c[3] = r->ab;
    s->nf = r->nf;
    s->f = calloc((size_t)r->nf, sizeof *s->f);
    size_t cap = 1;
    for (int k = 0; k < r->nf; k++) {
      const map_t *m = maps_find(&R.maps, r->f[k]);
      if (m && m->path[0]) {
        s->f[k].path = m->path;
        s->f[k].off = r->f[k] - m->base;
      } else { /* not in a file: keep the address, it will not match */
        s->f[k].path = m ? "[anon]" : "[unmapped]";
        s->f[k].off = r->f[k];
      }
      cap += strlen(s->f[k].path) + 24;
    }
    s->key = malloc(cap);
    CHECK(s->f && s->key);
    size_t o = 0;
    for (int k = 0; k < r->nf; k++)
      o += (size_t)snprintf(s->key + o, cap - o, "%s+%#lx;", s->f[k].path,
                            (unsigned long)s->f[k].off);
  }
  pc_free(&P);
  qsort(R.s, (size_t)R.n, sizeof *R.s, stk_cmp);
  int w = 0;
  for (int i = 0; i < R.n; i++) {
    if (w > 0 && strcmp(R.s[w - 1].key, R.s[i].key) == 0) {
      for (int k = 0; k < 4; k++) R.s[w - 1].c[k] += R.s[i].c[k];
      free(R.s[i].f);
      free(R.s[i].key);
      continue;
    }
    R.s[w++] = R.s[i];
  }
  R.n = w;
  return R;
}

static void maps_free(maps_t *M) {
  for (int i = 0; i < M->n; i++) free(M->m[i].path);
  free(M->m);
}

static void prof_free(prof_t *R) {
  for (int i = 0; i < R->n; i++) {
    free(R->s[i].f);
    free(R->s[i].key);
  }
  free(R->s);
  maps_free(&R->maps);
}

static maps_t self_maps;

static const char *base_name(const char *path) {
  const char *b = strrchr(path, '/');
  return b ? b + 1 : path;
}

/* Function name of a frame, looked up in this process (the same
 * executable and libraries, loaded elsewhere); NULL if unknown. */
static const char *frame_fn(const frame_t *f, uintptr_t *delta) {
  for (int i = 0; i < self_maps.n; i++) {
    if (strcmp(self_maps.m[i].path, f->path) != 0) continue;
    uintptr_t a = self_maps.m[i].base + f->off;
    Dl_info di;
    if (dladdr((void *)(a - 1), &di) && di.dli_sname) {
      if (delta) *delta = a - (uintptr_t)di.dli_saddr;
      return di.dli_sname;
    }
    return NULL;
  }
  return NULL;
}

static bool is_libc(const frame_t *f) {
  return strncmp(base_name(f->path), "libc.so", 7) == 0 ||
         strncmp(base_name(f->path), "libc-", 5) == 0;
}

/* One line per frame; a run of identical frames (recursion) as one line. */
static void stk_print(const char *who, const stk_t *s) {
  fprintf(stderr, "  %s: %" PRIu64 ": %" PRIu64 " [%" PRIu64 ": %" PRIu64 "], %d frames\n",
          who, s->c[0], s->c[1], s->c[2], s->c[3], s->nf);
  for (int k = 0; k < s->nf;) {
    int r = 1;
    while (k + r < s->nf && s->f[k + r].path == s->f[k].path && s->f[k + r].off == s->f[k].off)
      r++;
    uintptr_t d = 0;
    const char *fn = frame_fn(&s->f[k], &d);
    char name[160], rep[32] = "";
    if (fn) snprintf(name, sizeof name, "%s+%#lx", fn, (unsigned long)d);
    else snprintf(name, sizeof name, "?");
    if (r > 1) snprintf(rep, sizeof rep, "  (x%d, to #%d)", r, k + r - 1);
    fprintf(stderr, "    #%-3d %-36s %s+%#lx%s\n", k, name, base_name(s->f[k].path),
            (unsigned long)s->f[k].off, rep);
    k += r;
  }
}

/* A site's size in thread t (0 main, 1 second thread). */
static uint64_t site_size(int id, int t) { return SZ(id) + (t ? TOFF : 0); }
static bool has_size(const stk_t *s, uint64_t size) {
  return s->c[2] > 0 && s->c[3] == s->c[2] * size;
}

/* fn[] appear in order (leaf first), then `root`; `absent` does not. */
static bool stk_names(const stk_t *s, const char *const *fn, int nfn,
                      const char *root, const char *absent) {
  int want = 0;
  for (int k = 0; k < s->nf; k++) {
    const char *name = frame_fn(&s->f[k], NULL);
    if (!name) continue;
    if (absent && strcmp(name, absent) == 0) return false;
    const char *w = want < nfn ? fn[want] : want == nfn ? root : NULL;
    if (w && strcmp(name, w) == 0) want++;
  }
  return want == nfn + 1;
}

static int count_fn(const stk_t *s, const char *fn) {
  int c = 0;
  for (int k = 0; k < s->nf; k++) {
    const char *name = frame_fn(&s->f[k], NULL);
    if (name && strcmp(name, fn) == 0) c++;
  }
  return c;
}

/* The reference run must show every site with the frames it must have. */
static int check_ref(const prof_t *R) {
  static const char *const roots[2] = {"child_main", "thread_main"};
  int bad = 0, found = 0;
  for (int t = 0; t < 2; t++) {
    for (int id = 0; id < S_N; id++) {
      const site_t *st = NULL;
      for (size_t i = 0; i < NSITES; i++)
        if (sites[i].id == id) st = &sites[i];
      bool rec = id < S_MIX, mix = id >= S_MIX && id < S_DEEP, deep = id == S_DEEP;
      if (!st && !rec && !mix && !deep) continue; /* a site left out of this build */
      if (deep && t == 1) continue;                /* main thread only */
      int depth = rec ? id - S_REC + 1 : mix ? id - S_MIX + 1 : 0;
      int n = 0;
      for (int i = 0; i < R->n; i++) {
        const stk_t *s = &R->s[i];
        if (!has_size(s, site_size(id, t))) continue;
        n++;
        bool ok;
        if (deep) { /* cut at prof_depth, and nothing but rec */
          ok = s->nf >= 100 && count_fn(s, "rec") == s->nf;
        } else if (rec) {
          static const char *const fn[] = {"rec", "run_all"};
          ok = stk_names(s, fn, 2, roots[t], NULL) && count_fn(s, "rec") == depth;
        } else if (mix) {
          static const char *const fn[] = {"rec_mix", "run_all"};
          ok = stk_names(s, fn, 2, roots[t], NULL) && count_fn(s, "rec_mix") == depth &&
               count_fn(s, "nofp_rec") == depth - 1;
        } else {
          int nfn = 0;
          while (nfn < 5 && st->fn[nfn]) nfn++;
          ok = stk_names(s, st->fn, nfn, roots[t], st->absent);
          bool libc = false;
          for (int k = 0; k < s->nf; k++) libc |= is_libc(&s->f[k]);
          if (st->libc && !libc) ok = false;
          if (st->libc0 && !is_libc(&s->f[0])) ok = false;
        }
        if (!ok) {
          fprintf(stderr, "prof_unwind_cmp: %s run: site %d (size %" PRIu64
                  ") lacks frames it must have:\n", R->unwind, id, site_size(id, t));
          stk_print(R->unwind, s);
          bad++;
        }
      }
      if (n == 0) {
        fprintf(stderr, "prof_unwind_cmp: %s run: no stack of site %d (size %" PRIu64 ")\n",
                R->unwind, id, site_size(id, t));
        bad++;
      }
      found += n;
    }
  }
  int want = 2 * (REC_MAX + MIX_MAX + (int)NSITES) + 1;
  if (found < want) {
    fprintf(stderr, "prof_unwind_cmp: %s run: only %d stacks of the %d sites\n", R->unwind,
            found, want);
    bad++;
  }
  return bad;
}

static bool same_counts(const stk_t *a, const stk_t *b) {
  return memcmp(a->c, b->c, sizeof a->c) == 0;
}

/* Compares the two profiles; prints up to `show` differences. Returns the
 * number of stacks that differ (in either profile only, or with other
 * counts); *qsort_diff tells whether one is a stack of the qsort
 * comparator. */
static int compare(const prof_t *A, const prof_t *B, int show, bool *qsort_diff) {
  bool *usedb = calloc((size_t)B->n + 1, 1);
  const stk_t **onlya = calloc((size_t)A->n + 1, sizeof *onlya);
  CHECK(usedb && onlya);
  int diff = 0, shown = 0, na = 0, i = 0, j = 0;
  *qsort_diff = false;
  while (i < A->n || j < B->n) {
    int c = i == A->n ? 1 : j == B->n ? -1 : strcmp(A->s[i].key, B->s[j].key);
    if (c == 0) {
      if (!same_counts(&A->s[i], &B->s[j])) {
        if (shown++ < show) {
          fprintf(stderr, "prof_unwind_cmp: same stack, different counts:\n");
          stk_print(A->unwind, &A->s[i]);
          stk_print(B->unwind, &B->s[j]);
        }
        diff++;
      }
      usedb[j] = true;
      i++, j++;
    } else if (c < 0) {
      onlya[na++] = &A->s[i++];
      diff++;
    } else {
      j++, diff++;
    }
  }
  /* A stack only in A: show B's stack with the same counts beside it. */
  for (int k = 0; k < na; k++) {
    const stk_t *a = onlya[k];
    for (int t = 0; t < 2; t++)
      if (has_size(a, site_size(S_QSORT, t))) *qsort_diff = true;
    if (shown++ >= show) continue;
    fprintf(stderr, "prof_unwind_cmp: a stack only %s recorded:\n", A->unwind);
    stk_print(A->unwind, a);
    for (int m = 0; m < B->n; m++) {
      if (usedb[m] || !same_counts(a, &B->s[m])) continue;
      fprintf(stderr, "  where %s has (same counts):\n", B->unwind);
      stk_print(B->unwind, &B->s[m]);
      usedb[m] = true;
      break;
    }
  }
  for (int m = 0; m < B->n; m++) {
    if (usedb[m]) continue;
    for (int t = 0; t < 2; t++)
      if (has_size(&B->s[m], site_size(S_QSORT, t))) *qsort_diff = true;
    if (shown++ >= show) continue;
    fprintf(stderr, "prof_unwind_cmp: a stack only %s recorded:\n", B->unwind);
    stk_print(B->unwind, &B->s[m]);
  }
  if (shown > show)
    fprintf(stderr, "prof_unwind_cmp: ... %d more differences not shown\n", shown - show);
  free(usedb);
  free(onlya);
  return diff;
}

/* Whether the compiler laid out the noreturn case as intended: the return
 * address in nofp_calls_die is nofp_after_die's first byte. Only a note:
 * the comparison does not depend on it. */
static void noreturn_note(const prof_t *R) {
  for (int i = 0; i < R->n; i++) {
    const stk_t *s = &R->s[i];
    if (!has_size(s, site_size(S_NOFP_DIE, 0)) || s->nf < 2) continue;
    for (int m = 0; m < self_maps.n; m++) {
      if (strcmp(self_maps.m[m].path, s->f[1].path) != 0) continue;
      bool at = self_maps.m[m].base + s->f[1].off == (uintptr_t)nofp_after_die;
      printf("prof_unwind_cmp: noreturn call: return address %s the next function's entry\n",
             at ? "is" : "is not");
      return;
    }
  }
}

static char exe[4096], dir[4096], fa[4200], fb[4200];

static void cleanup(void) {
  unlink(fa);
  unlink(fb);
  rmdir(dir);
}

/* Runs the child with prof_unwind:<unwind>, writing <dir>/<tag>.heap. */
static void run_child(const char *unwind, const char *file) {
  int ne = 0;
  while (environ[ne]) ne++;
  char **env = calloc((size_t)ne + 2, sizeof *env);
  CHECK(env);
  int k = 0;
  for (int i = 0; i < ne; i++)
    if (strncmp(environ[i], "NALLOC_CONF=", 12) != 0) env[k++] = environ[i];
  char conf[256];
  snprintf(conf, sizeof conf, "NALLOC_CONF=prof:true,lg_prof_sample:0,prof_unwind:%s", unwind);
  env[k++] = conf;
  env[k] = NULL;
  char *argv[] = {exe, "--child", (char *)unwind, (char *)file, NULL};
  pid_t pid;
  int e = posix_spawn(&pid, exe, NULL, NULL, argv, env);
  if (e) {
    fprintf(stderr, "prof_unwind_cmp: posix_spawn %s: %s\n", exe, strerror(e));
    cleanup();
    exit(1);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0) CHECK(errno == EINTR);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "prof_unwind_cmp: the prof_unwind:%s run failed (status %#x)\n", unwind, st);
    cleanup();
    exit(1);
  }
  free(env);
}

/* Frames in all, and stacks with a libc frame under the program's own
 * (not just libc's start-up frames at the root). */
static int frames_total(const prof_t *R, int *libc_stacks) {
  int n = 0;
  *libc_stacks = 0;
  for (int i = 0; i < R->n; i++) {
    const stk_t *s = &R->s[i];
    n += s->nf;
    for (int k = 0; k < s->nf; k++) {
      const char *fn = frame_fn(&s->f[k], NULL);
      if (fn && (!strcmp(fn, "child_main") || !strcmp(fn, "thread_main"))) break;
      if (is_libc(&s->f[k])) {
        ++*libc_stacks;
        break;
      }
    }
  }
  return n;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--child") == 0) return child_main(argv[2], argv[3]);

  bool expect_differ = false;
  int a = 1;
  if (a < argc && strcmp(argv[a], "--expect-differ") == 0) expect_differ = true, a++;
  const char *ref = "libunwind", *cand = "dwarf";
  if (argc - a == 2) ref = argv[a], cand = argv[a + 1];
  else if (argc != a) {
    fprintf(stderr, "usage: %s [--expect-differ] [REF CAND]\n", argv[0]);
    return 2;
  }

  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  CHECK(n > 0);
  exe[n] = 0;
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/prof_unwind_cmp.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  CHECK(mkdtemp(dir));
  snprintf(fa, sizeof fa, "%s/a.heap", dir);
  snprintf(fb, sizeof fb, "%s/b.heap", dir);
  run_child(ref, fa);
  run_child(cand, fb);

  self_maps = maps_load("/proc/self/maps", NULL);
  prof_t A = prof_load(fa, ref), B = prof_load(fb, cand);
  int bad = check_ref(&A);
  int fa_n, la, fb_n, lb;
  fa_n = frames_total(&A, &la);
  fb_n = frames_total(&B, &lb);
  printf("prof_unwind_cmp: %s: %d stacks, %d frames, %d stacks through libc\n", ref, A.n,
         fa_n, la);
  printf("prof_unwind_cmp: %s: %d stacks, %d frames, %d stacks through libc\n", cand, B.n,
         fb_n, lb);
  bool qsort_diff;
  int diff = compare(&A, &B, expect_differ ? 3 : 20, &qsort_diff);
  printf("prof_unwind_cmp: %d differences (qsort comparator stacks %s)\n", diff,
         qsort_diff ? "differ" : "the same");
  noreturn_note(&A);

  int status = 0;
  if (bad) {
    fprintf(stderr, "prof_unwind_cmp: the %s run misses frames (%d problems)\n", ref, bad);
    status = 1;
  } else if (expect_differ) {
    if (!diff || !qsort_diff) {
      fprintf(stderr, "prof_unwind_cmp: %s and %s were expected to differ on the qsort "
              "comparator's stacks\n", ref, cand);
      status = 1;
    }
  } else if (diff) {
    fprintf(stderr, "prof_unwind_cmp: prof_unwind:%s and prof_unwind:%s disagree; dumps in %s\n",
            ref, cand, dir);
    status = 1;
  }
  if (status == 0) {
    cleanup();
    printf("prof_unwind_cmp: ok (%s vs %s%s)\n", ref, cand,
           expect_differ ? ", differ as expected" : "");
  }
  prof_free(&A);
  prof_free(&B);
  maps_free(&self_maps);
  return status;
}
