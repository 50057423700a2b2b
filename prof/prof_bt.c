/* prof_bt.c -- backtraces of sampled allocations.
 *
 * Three unwinders (opt.prof_unwind):
 *   dwarf      (default) steps with per-return-address rules from the
 *              DWARF call-frame information, cached by prof_cfi.c: right
 *              through code built without frame pointers, at about the cost
 *              of an fp walk; a frame it cannot express goes to libunwind.
 *   libunwind  unw_backtrace() for every stack: the reference dwarf must
 *              match, ~5x slower.
 *   fp         walks the rbp chain: the cheapest, but a library without
 *              frame pointers cuts or skips frames. Every frame pointer is
 *              checked before it is read (aligned, strictly increasing,
 *              inside the thread's stack mapping), so a garbage rbp ends
 *              the walk instead of faulting.
 * All return frames leaf first, with frame 0 = `caller` (the return
 * address into the function that called malloc/new/...): everything above
 * it is nalloc itself and is dropped here, because google-pprof and Go's
 * pprof do not reliably strip allocator frames (reference §1.4).
 *
 * The thread's stack bounds come from /proc/self/maps (read with
 * open/read into a stack buffer) the first time a thread walks, and again
 * only if the walk starts outside them (sigaltstack, coroutines):
 * pthread_getattr_np cannot be used because it calls malloc.
 *
 * libunwind is not linked (dlopen, RTLD_LOCAL), so its _Unwind_* names
 * never interpose libgcc's for C++ exceptions, and it is loaded only when
 * a walk first needs it (bt_unw_get): with prof_unwind:dwarf that is the
 * first frame the cached DWARF rules cannot express, which most processes
 * never meet, so they never map it or its liblzma (the load was half the
 * instructions and a third of the system calls of a prof:true start).
 * prof_unwind:libunwind loads it when the profiler starts. Before the
 * library constructor (allocations sampled in libraries initialised
 * earlier), a stack the DWARF rules cannot walk ends at the caller. */
#define _GNU_SOURCE /* pthread_getattr_np, gettid */
#include "prof_internal.h"
#include "../alloc/helper_thread.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>

#ifndef NALLOC_UNWIND_SONAME
#define NALLOC_UNWIND_SONAME "libunwind.so.8"
#endif

/* libunwind's unw_backtrace, once loaded */
typedef int (*bt_unw_fn_t)(void **buf, int size);
static _Atomic(bt_unw_fn_t) bt_unw_backtrace;
/* The load: not tried, under way (inline or in the loader thread), tried
 * (bt_unw_backtrace says whether it worked). */
enum { BT_UNW_IDLE, BT_UNW_LOADING, BT_UNW_DONE };
static _Atomic unsigned bt_unw_state;
static _Atomic bool bt_unw_lazy; /* prof_bt_prime ran: loads on demand */

static bool hexval(char c, unsigned *v) {
  if (c >= '0' && c <= '9') *v = (unsigned)(c - '0');
  else if (c >= 'a' && c <= 'f') *v = (unsigned)(c - 'a' + 10);
  else return false;
  return true;
}

/* Calls fn(start, end, perms, arg) for each line of /proc/self/maps until
 * it returns true. Reads with open/read into a stack buffer: no malloc. */
typedef bool (*maps_fn)(uintptr_t s, uintptr_t e, const char *perms, void *arg);
/* One line's "start-end perms": fn's answer, false if it does not parse. */
static bool maps_line(const char *l, size_t n, maps_fn fn, void *arg) {
  uintptr_t s = 0, e = 0;
  size_t i = 0;
  unsigned v;
  while (i < n && hexval(l[i], &v)) s = s * 16 + v, i++;
  if (i >= n || l[i] != '-') return false;
  i++;
  while (i < n && hexval(l[i], &v)) e = e * 16 + v, i++;
  return i + 5 <= n && l[i] == ' ' && fn(s, e, l + i + 1, arg);
}

/* Lines are taken in place and the buffer is compacted only before a
 * read (moving every remaining byte after each line cost ~500,000
 * instructions per scan: half of the profiler's start-up). A line longer
 * than the buffer (a path near PATH_MAX) is judged by its head. */
static void maps_scan(maps_fn fn, void *arg) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[4096];
  size_t pos = 0, have = 0;
  bool eof = false, skip = false; /* skip: the rest of an over-long line */
  for (;;) {
    char *nl = memchr(buf + pos, '\n', have - pos);
    if (nl == NULL && !eof && (pos > 0 || have < sizeof buf)) {
      memmove(buf, buf + pos, have - pos);
      have -= pos;
      pos = 0;
      ssize_t r = read(fd, buf + have, sizeof buf - have);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) eof = true;
      else have += (size_t)r;
      continue;
    }
    size_t end = nl != NULL ? (size_t)(nl - buf) : have;
    if (end == pos && nl == NULL) break; /* eof, nothing left */
    if (!skip && maps_line(buf + pos, end - pos, fn, arg)) break;
    skip = nl == NULL && !eof; /* a full buffer without a newline */
    pos = nl != NULL ? end + 1 : end;
  }
  close(fd);
}

typedef struct {
  uintptr_t addr, lo, hi;
  bool found;
} bounds_arg_t;
static bool bounds_cb(uintptr_t s, uintptr_t e, const char *perms, void *arg) {
  (void)perms;
  bounds_arg_t *b = arg;
  if (b->addr >= s && b->addr < e) {
    b->lo = s, b->hi = e, b->found = true;
    return true;
  }
  return false;
}

/* Finds the calling thread's stack, which contains `addr`: for a thread
 * other than the main one, the block glibc (or the program) gave it, which
 * pthread_getattr_np reads from the thread's descriptor; else (the main
 * thread, whose stack pthread_getattr_np would find in /proc/self/maps
 * too, or a frame on an alternate signal stack) the mapping that contains
 * it. Each thread's first sample looked its stack up in /proc/self/maps,
 * whose text the kernel writes out whole, one line per mapping, every
 * thread's stack among them: bench-threads (short-lived threads, ~0.4
 * samples each) spent 2.7x its unprofiled time doing that (sys 0.35 s
 * against 0.08 s). Called with tsd->reentrant raised: the affinity mask
 * pthread_getattr_np allocates is not sampled. */
static bool stack_bounds(uintptr_t addr, uintptr_t *lo, uintptr_t *hi) {
  if (gettid() != getpid()) {
    pthread_attr_t at;
    void *base = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &at) == 0) {
      if (pthread_attr_getstack(&at, &base, &size) != 0) size = 0;
      pthread_attr_destroy(&at);
    }
    if (size != 0 && addr >= (uintptr_t)base && addr - (uintptr_t)base < size) {
      *lo = (uintptr_t)base;
      *hi = (uintptr_t)base + size;
      return true;
    }
  }
  bounds_arg_t b = {addr, 0, 0, false};
  maps_scan(bounds_cb, &b);
  *lo = b.lo;
  *hi = b.hi;
  return b.found;
}

/* Executable mappings, for checking that what the fp walker reads as a
 * return address points into code. Code built without frame pointers uses
 * rbp as a general register; when it happens to hold a stack address, the
 * "frame" above it is junk (a heap pointer, a counter) and every sample
 * would get a new stack. The table is rebuilt at most once a second, when
 * an address is not found (a library dlopen'ed since); readers race with
 * the rebuild only to the extent of a wrong yes/no, never a bad access. */
#define EXEC_MAX 1024
NALLOC_BIG_BSS static _Atomic uintptr_t exec_lo[EXEC_MAX], exec_hi[EXEC_MAX];
static _Atomic int exec_n;
static _Atomic uint64_t exec_when;
static nlock_t exec_lock = NLOCK_INITIALIZER(LOCK_PROF_UNWIND);

typedef struct {
  int n;
} exec_arg_t;
static bool exec_cb(uintptr_t s, uintptr_t e, const char *perms, void *arg) {
  exec_arg_t *x = arg;
  if (perms[2] != 'x') return false;
  if (x->n > 0 && atomic_load_explicit(&exec_hi[x->n - 1],
                                       memory_order_relaxed) == s) {
    atomic_store_explicit(&exec_hi[x->n - 1], e, memory_order_relaxed);
    return false;
  }
  atomic_store_explicit(&exec_lo[x->n], s, memory_order_relaxed);
  atomic_store_explicit(&exec_hi[x->n], e, memory_order_relaxed);
  return ++x->n == EXEC_MAX;
}

static void exec_refresh(void) {
  if (!nlock_trylock(&exec_lock)) return;
  exec_arg_t x = {0};
  maps_scan(exec_cb, &x);
  atomic_store_explicit(&exec_n, x.n, memory_order_release);
  atomic_store_explicit(&exec_when, nalloc_now_ns(), memory_order_relaxed);
  nlock_unlock(&exec_lock);
}

static bool exec_find(uintptr_t a) {
  int lo = 0, hi = atomic_load_explicit(&exec_n, memory_order_acquire) - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (a < atomic_load_explicit(&exec_lo[mid], memory_order_relaxed))
      hi = mid - 1;
    else if (a >= atomic_load_explicit(&exec_hi[mid], memory_order_relaxed))
      lo = mid + 1;
    else
      return true;
  }
  return false;
}

static bool is_code(uintptr_t a) {
  if (likely(exec_find(a))) return true;
  uint64_t now = nalloc_now_ns();
  if (atomic_load_explicit(&exec_n, memory_order_relaxed) > 0 &&
      now - atomic_load_explicit(&exec_when, memory_order_relaxed) < 1000000000ull)
    return false; /* built less than a second ago (or never: build it) */
  exec_refresh();
  return exec_find(a);
}

void prof_bt_prefork(void) {
  nlock_prefork(&exec_lock);
  prof_cfi_prefork();
}
void prof_bt_postfork_parent(void) {
  prof_cfi_postfork_parent();
  nlock_postfork_parent(&exec_lock);
}
bool prof_bt_postfork_child(void) {
  /* a load under way in the parent's loader thread never ends here */
  unsigned loading = BT_UNW_LOADING;
  atomic_compare_exchange_strong(&bt_unw_state, &loading, BT_UNW_IDLE);
  bool broken = prof_cfi_postfork_child();
  return nlock_postfork_child(&exec_lock) || broken;
}

/* prof_entry_frame from `frame` (one of our callers), after making sure
 * the thread's stack bounds cover it. False: lost our way inside nalloc. */
static NALLOC_ALWAYS_INLINE NALLOC_NO_ASAN bool
bt_entry_frame(prof_tdata_t *td, const void *caller, const void *frame,
               uintptr_t *entry) {
  uintptr_t fp = (uintptr_t)frame;
  if (fp < td->stk_lo || fp >= td->stk_hi) {
    if (!stack_bounds(fp, &td->stk_lo, &td->stk_hi)) {
      td->stk_lo = td->stk_hi = 0;
      return false;
    }
  }
  return prof_entry_frame(fp, td->stk_hi, caller, PROF_SKIP_MAX, entry);
}

static NALLOC_NOINLINE NALLOC_NO_ASAN unsigned
bt_fp(prof_tdata_t *td, const void *caller, const void *frame, void **out,
      unsigned max) {
  uintptr_t fp;
  out[0] = (void *)caller;
  if (!bt_entry_frame(td, caller, frame, &fp)) return 1;
  const uintptr_t hi = td->stk_hi;
  unsigned n = 1;
  /* The entry frame's saved rbp is the caller's frame, if it keeps one. */
  uintptr_t entry = fp;
  fp = ((uintptr_t *)entry)[0];
  if (fp <= entry || fp > hi - 16 || (fp & 7)) return n;
  while (n < max) {
    void *ret = ((void **)fp)[1];
    uintptr_t *seen = &td->code_seen[((uintptr_t)ret >> 4) & 63];
    if (*seen != (uintptr_t)ret) { /* most stacks repeat: skip the search */
      /* ...and most end at the same junk word above the outermost frame */
      if (ret == NULL || (uintptr_t)ret == td->code_bad) break;
      if (!is_code((uintptr_t)ret)) {
        td->code_bad = (uintptr_t)ret;
        break;
      }
      *seen = (uintptr_t)ret;
    }
    out[n++] = ret;
    uintptr_t next = ((uintptr_t *)fp)[0];
    if (next <= fp || next > hi - 16 || (next & 7)) break;
    fp = next;
  }
  return n;
}

static bt_unw_fn_t bt_unw_get(void *const *walked, unsigned n);

/* libunwind's stack. `walked[0, n)`: the frames the DWARF rules walked
 * before handing over (for bt_unw_get's safety check). */
static NALLOC_NOINLINE unsigned bt_unw(const void *caller, void **out,
                                       unsigned max, void *const *walked,
                                       unsigned n_walked) {
  void *buf[PROF_DEPTH_MAX + PROF_SKIP_MAX];
  bt_unw_fn_t unw = atomic_load_explicit(&bt_unw_backtrace, memory_order_acquire);
  if (unlikely(unw == NULL)) unw = bt_unw_get(walked, n_walked);
  if (unlikely(unw == NULL)) {
    out[0] = (void *)caller;
    return 1;
  }
  prof_loader_enter();
  int got = unw(buf, (int)(max + PROF_SKIP_MAX));
  prof_loader_exit();
  int i = 0;
  while (i < got && i < PROF_SKIP_MAX && buf[i] != caller) i++;
  if (i >= got || buf[i] != caller) {
    out[0] = (void *)caller;
    return 1;
  }
  unsigned n = 0;
  for (; i < got && n < max; i++) out[n++] = buf[i];
  return n;
}

/* Steps through the program's frames with the cached DWARF rules of
 * prof_cfi.c, starting from the caller's registers as nalloc's entry frame
 * saved them (rsp = the entry frame's CFA, rbp = its saved rbp). Every
 * address read is checked to lie in the thread's stack above rsp; any
 * frame the rules cannot express, or any check that fails, hands the
 * whole stack to libunwind, so the result is always libunwind's.
 *
 * The walk is a function of (caller, rsp, rbp) and of the stack words it
 * reads, so it also writes down each word's address and value: while they
 * are unchanged, so is the stack (prof_bt_tctx replays it). A saved rbp
 * that no later rule uses (the rbp-based CFA of a frame built with frame
 * pointers) cannot change the result, so its word is not kept: in code
 * without frame pointers most frames save rbp as a plain register. For
 * the same reason the caller's rbp is part of the key only if a rule used
 * it before a frame restored rbp from the stack (w->bp_in): a caller built
 * without frame pointers holds data there, different at every call.
 *
 * The same holds from any frame out: the frames above a frame are a
 * function of its (return address, rsp, rbp if used) and of the words the
 * walk read from there out. So the thread's last full walk is kept, root
 * first (td->sfx), and a walk that reaches one of its frames in the same
 * state takes the outer frames, their hash and their words from it once
 * those words are read back unchanged. Python's import stacks are ~70
 * frames deep and differ in the innermost few: a suffix costs a word
 * compare per word instead of a rule lookup and the checks per frame.
 * Both stacks' rsp values rise strictly, so the candidate frame is found
 * by merging the two (one compare a step). Words are checked from the
 * innermost out; a changed word rules out every candidate whose suffix
 * holds it (the outer candidates after it do not), so each word is read
 * at most once a walk. */

/* How the walk ended. */
enum { BT_END, BT_CUT, BT_JOIN, BT_OTHER };

/* Can the walk that reached cached frame c with rbp `bp` take the frames
 * from c out? `*wlim`: suffixes longer than it hold a changed word. */
static NALLOC_ALWAYS_INLINE NALLOC_NO_ASAN bool
bt_sfx_same(const prof_sfx_t *s, unsigned c, uintptr_t bp, unsigned *wlim) {
  const prof_sfx_frame_t *f = &s->f[c];
  if (f->bp_live && f->bp != bp) return false;
  unsigned e = f->wend;
  if (e > *wlim) return false;
  int i = prof_words_changed(s->val, s->off, s->hi, e);
  if (i >= 0) *wlim = (unsigned)i;
  return i < 0;
}

/* The outermost frame r of the record whose words from there in are no
 * more than PROF_WALK_WORDS: nk - s->f[r].wend <= PROF_WALK_WORDS, where
 * nk = s->f[s->n - 1].wend. wend never falls from the root in (each frame
 * adds its words to its outer neighbour's), so a binary search finds it.
 * It was a scan from the leaf out, one frame a step: ~64 steps (~570
 * instructions) for every walk of a deep stack, 278M of test_json's 6.6G
 * instructions (callgrind, 486k walks). */
static unsigned bt_sfx_first_within(const prof_sfx_t *s, unsigned nk) {
  unsigned lo = 0, hi = s->n - 1; /* s->f[hi] qualifies: its wend is nk */
  nalloc_assert(s->n > 0 && s->f[hi].wend == nk);
  while (lo < hi) {
    unsigned mid = lo + (hi - lo) / 2;
    nalloc_assert(s->f[mid].wend <= s->f[mid + 1].wend);
    if (nk - s->f[mid].wend <= PROF_WALK_WORDS) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/* dst[i] = src[i] + d for i < n: a record's offsets from hi made offsets
 * from sp0 (its words lie in [sp0, hi), so both fit). Four at a time: one
 * at a time took ~320 instructions a walk of test_json's deep stacks. */
typedef int32_t bt_v4si __attribute__((vector_size(16)));
static void bt_rebase(int32_t *dst, const int32_t *src, unsigned n, int32_t d) {
  const bt_v4si dv = {d, d, d, d};
  unsigned i = 0;
  for (; i + 4 <= n; i += 4) {
    bt_v4si v;
    memcpy(&v, src + i, sizeof v);
    v += dv;
    memcpy(dst + i, &v, sizeof v);
  }
  for (; i < n; i++) dst[i] = src[i] + d;
#ifdef NALLOC_DEBUG
  for (i = 0; i < n; i++) nalloc_assert(src[i] <= 0 && dst[i] >= 0);
#endif
}

static NALLOC_NOINLINE NALLOC_NO_ASAN unsigned
bt_dwarf(prof_tdata_t *td, const void *caller, uintptr_t sp, uintptr_t bp,
         void **out, unsigned max, prof_walk_t *w, uint64_t *hash) {
  const uintptr_t hi = td->stk_hi;
  prof_sfx_t *s = &td->sfx;
  prof_bt_frame_t *fr = td->bt_fr;
  prof_walk_word_t *word = td->bt_word;
  uintptr_t pc = (uintptr_t)caller;
  unsigned n = 0, k = 0, how;
  /* the cached frame at or above sp (-1: none), and the word limit */
  int c = s->n > 0 && s->hi == hi ? (int)s->n - 1 : -1;
  unsigned wlim = PROF_SFX_WORDS;
  const uintptr_t sp0 = sp;
  /* every word read lies in [sp0, hi): its offsets fit prof_walk_rec_t's */
  if (unlikely(hi - sp0 > INT32_MAX)) goto other;
#define READ(where, dst)                               \
  do {                                                 \
    uintptr_t a_ = (where), v_ = *(uintptr_t *)a_;     \
    word[k++] = (prof_walk_word_t){a_, v_};            \
    (dst) = v_;                                        \
  } while (0)
  for (;;) {
    out[n] = (void *)pc;
    prof_bt_frame_t *f = &fr[n];
    f->sp = sp;
    f->bp = bp;
    f->k0 = (uint16_t)k;
    f->bpw = PROF_SFX_WORDS;
    f->use_bp = false;
    while (c >= 0 && s->f[c].sp < sp) c--;
    if (c >= 0 && s->f[c].sp == sp && s->pc[PROF_DEPTH_MAX - 1 - c] == pc &&
        (!s->cut || n + (unsigned)c + 1 >= max) &&
        bt_sfx_same(s, (unsigned)c, bp, &wlim)) {
      how = BT_JOIN;
      break;
    }
    if (++n == max) {
      how = BT_CUT;
      break;
    }
    uint64_t r = prof_cfi_rule(pc);
    uintptr_t cfa = (uintptr_t)(intptr_t)(int32_t)(r >> 32);
    unsigned kind = r & 7;
    if (likely(kind == CFI_RSP)) {
      cfa += sp;
    } else if (kind == CFI_RBP) {
      f->use_bp = true;
      cfa += bp;
    } else if (kind == CFI_DEREF) {
      f->use_bp = true;
      cfa += bp;
      if (cfa < sp || cfa >= hi || (cfa & 7)) goto other;
      READ(cfa, cfa);
    } else if (kind == CFI_END) {
      how = BT_END;
      break;
    } else {
      goto other;
    }
    /* sp < cfa <= hi, 8-aligned: so cfa - 8 is in the stack */
    if (unlikely(cfa - sp - 8 > hi - sp - 8 || (cfa & 7))) goto other;
    if (r & 8) {
      uintptr_t at = cfa + (uintptr_t)(intptr_t)(8 * (int8_t)(r >> 16));
      if (unlikely(at < sp)) goto other;
      f->bpw = (uint16_t)k;
      READ(at, bp);
    }
    READ(cfa - 8, pc);
    sp = cfa;
    if (pc == 0) {
      how = BT_END;
      break;
    }
  }
#undef READ
  /* Frames fr[0, n) are this walk's own (the last one's reads end at
   * word k); in BT_JOIN, fr[n] is cached frame c, whose frames out are
   * taken. */
  unsigned base = 0; /* cached frames kept: s->f[0, base) */
  if (how == BT_JOIN) {
    unsigned total = n + (unsigned)c + 1;
    if (total > max) {
      /* deeper than the limit: the cached root is cut off, and the
       * record stays as it is (it cannot hold this walk) */
      memcpy(out + n, &s->pc[PROF_DEPTH_MAX - 1 - c], (max - n) * sizeof *out);
      w->nwords = PROF_WALK_NONE;
      *hash = 0;
      return max;
    }
    memcpy(out + n, &s->pc[PROF_DEPTH_MAX - 1 - c], (total - n) * sizeof *out);
    base = (unsigned)c + 1;
  } else {
    s->cut = how == BT_CUT;
  }
  /* Write this walk's frames fr[0, n) into the record above s->f[base-1],
   * outermost first, keeping the words the walk from each frame out
   * needs: every return address and CFA word, and a saved rbp only if a
   * frame further out read rbp before restoring it. */
  unsigned nk = base > 0 ? s->f[base - 1].wend : 0;
  bool live = base > 0 && s->f[base - 1].bp_live;
  uint64_t h = base > 0 ? s->f[base - 1].h : PROF_BT_HASH_SEED;
  unsigned kend = k; /* words of fr[i] are [fr[i].k0, kend) */
  if (how == BT_JOIN) kend = fr[n].k0;
  uint64_t ver = ++s->gen;
  for (unsigned i = n; i-- > 0;) {
    const prof_bt_frame_t *f = &fr[i];
    unsigned r = base + (n - 1 - i);
    prof_sfx_frame_t *d = &s->f[r];
    for (unsigned j = f->k0; j < kend; j++)
      if (j != f->bpw || live) {
        s->val[nk] = word[j].val;
        s->off[nk++] = (int32_t)(intptr_t)(word[j].addr - hi);
      }
    live = f->use_bp || (f->bpw == PROF_SFX_WORDS && live);
    kend = f->k0;
    h = prof_bt_hash_step(h, (uintptr_t)out[i]);
    *d = (prof_sfx_frame_t){f->sp, f->bp, h, (uint16_t)nk, live};
    s->ver[r] = ver;
    s->pc[PROF_DEPTH_MAX - 1 - r] = (uintptr_t)out[i];
  }
  s->n = base + n;
  s->hi = hi;
  *hash = prof_bt_hash_fin(h, s->n);
  nalloc_assert(s->n <= max);
  /* The walk's replay record: every word the walk from the leaf needs,
   * outermost first; past PROF_WALK_WORDS, the innermost ones and the
   * outermost frame of the record whose words from there out are no more
   * than the rest (the frame furthest out: the one a later walk is least
   * likely to rewrite). CPython's test_json (callgrind, main process)
   * checks ~68 words an allocation: with only records of at most 64
   * words, 3.21M of its 3.30M allocations were walked; with this, 158k. */
  w->bp_in = live;
  w->sfx_c = PROF_WALK_NOSFX;
  unsigned from = 0;
  if (nk > PROF_WALK_WORDS) {
    unsigned r = bt_sfx_first_within(s, nk);
    w->sfx_c = r;
    w->sfx_ver = s->ver[r];
    from = s->f[r].wend;
  }
  nalloc_assert(nk - from <= PROF_WALK_WORDS);
  if (w->word == NULL) { /* the head's first walk: one record each */
    nalloc_assert(td->walk_nrec < PROF_WALKS);
    w->word = &td->walk_word[td->walk_nrec++];
  }
  memcpy(w->word->val, s->val + from, (nk - from) * sizeof *s->val);
  bt_rebase(w->word->off, s->off + from, nk - from, (int32_t)(hi - sp0));
  /* padded to a multiple of four with copies of the innermost word (the
   * replay reads it first, so the copies read a line it holds): the
   * replay's check then has no one-word remainder loop (prof_words_changed4;
   * PROF_WALK_WORDS is a multiple of four, so the padding fits) */
  unsigned nw = nk - from;
  for (; nw & 3; nw++) {
    w->word->val[nw] = w->word->val[nw - 1];
    w->word->off[nw] = w->word->off[nw - 1];
  }
  w->nwords = nw;
  return s->n;
other:
  w->nwords = PROF_WALK_NONE;
  *hash = 0;
  return bt_unw(caller, out, max, out, n);
}

NALLOC_NOINLINE prof_tctx_t *prof_bt_walk_new(prof_tdata_t *td,
                                             const void *caller, uintptr_t sp,
                                             uintptr_t bp, prof_walk_t *w) {
  void *pcs[PROF_DEPTH_MAX];
  tsd_t *tsd = tsd_get();
  tsd->reentrant++; /* libunwind may allocate: not the program's memory */
  uint64_t hs;
  unsigned n = bt_dwarf(td, caller, sp, bp, pcs, opt_prof_depth, w, &hs);
  prof_tctx_t *t = hs != 0 ? prof_tctx_lookup_hashed(td, pcs, n, hs)
                           : prof_tctx_lookup(td, pcs, n);
  w->pc = (uintptr_t)caller;
  w->sp = sp;
  w->bp = bp;
  w->tctx = w->nwords != PROF_WALK_NONE ? t : NULL;
  tsd->reentrant--; /* after the walk record is whole (a fork child trusts
                       this thread's tdata only while reentrant is 0) */
  return t;
}

static NALLOC_NOINLINE prof_tctx_t *bt_other(prof_tdata_t *td,
                                             const void *caller,
                                             const void *frame) {
  void *pcs[PROF_DEPTH_MAX];
  unsigned n = opt_prof_unwind == PROF_UNWIND_FP
                   ? bt_fp(td, caller, frame, pcs, opt_prof_depth)
                   : bt_unw(caller, pcs, opt_prof_depth, NULL, 0);
  return prof_tctx_lookup(td, pcs, n);
}

NALLOC_NO_ASAN prof_tctx_t *prof_bt_tctx_slow(prof_tdata_t *td,
                                              const void *caller,
                                              const void *frame) {
  uintptr_t fp;
  prof_tctx_t *t;
  tsd_t *tsd = tsd_get();
  tsd->reentrant++; /* what the unwinders call may allocate */
  if (opt_prof_unwind != PROF_UNWIND_DWARF ||
      !bt_entry_frame(td, caller, frame, &fp)) {
    t = bt_other(td, caller, frame);
  } else {
    uintptr_t sp = fp + 16, bp = ((uintptr_t *)fp)[0];
    prof_walk_t *w;
    t = prof_walk_find(td, caller, sp, bp, &w);
    if (t == NULL) t = prof_bt_walk_new(td, caller, sp, bp, w);
  }
  tsd->reentrant--;
  return t;
}

/* Loads libunwind. Its allocations are nalloc's, not the program's. */
static void bt_unw_load(void) {
  tsd_t *tsd = tsd_get();
  tsd->reentrant++;
  prof_loader_enter();
  void *h = dlopen(NALLOC_UNWIND_SONAME, RTLD_NOW | RTLD_LOCAL);
  void *f = h != NULL ? dlsym(h, "unw_backtrace") : NULL;
  const char *why = f == NULL ? dlerror() : NULL;
  prof_loader_exit();
  tsd->reentrant--;
  if (f == NULL) {
    nalloc_log("prof: cannot load %s (%s): stacks the DWARF rules cannot walk end at "
               "the caller", NALLOC_UNWIND_SONAME, why != NULL ? why : "no unw_backtrace");
  } else {
    bt_unw_fn_t fn;
    memcpy(&fn, &f, sizeof fn); /* a data pointer to a function pointer */
    atomic_store_explicit(&bt_unw_backtrace, fn, memory_order_release);
  }
  atomic_store_explicit(&bt_unw_state, BT_UNW_DONE, memory_order_release);
}

static void *bt_unw_loader(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "nalloc-prof-unw");
  bt_unw_load();
  return NULL;
}

/* Is pc in the dynamic loader (ld.so)? Its ELF header and program headers
 * are mapped at AT_BASE; read in place, no loader call. */
static bool bt_in_ldso(uintptr_t pc) {
  uintptr_t base = (uintptr_t)getauxval(AT_BASE);
  if (base == 0) return false;
  const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)base;
  const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(base + eh->e_phoff);
  for (unsigned i = 0; i < eh->e_phnum; i++)
    if (ph[i].p_type == PT_LOAD && pc - (base + ph[i].p_vaddr) < ph[i].p_memsz)
      return true;
  return false;
}

/* The number of threads of the process (/proc/self/status), 0 if
 * unknown. Read with open/read into a stack buffer: no malloc. */
static unsigned bt_threads(void) {
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[4096];
  size_t have = 0;
  ssize_t r;
  while (have < sizeof buf - 1 &&
         ((r = read(fd, buf + have, sizeof buf - 1 - have)) > 0 ||
          (r < 0 && errno == EINTR)))
    if (r > 0) have += (size_t)r;
  close(fd);
  buf[have] = '\0';
  static const char key[] = "\nThreads:";
  const char *t = memmem(buf, have, key, sizeof key - 1);
  if (t == NULL) return 0;
  t += sizeof key - 1;
  while (*t == ' ' || *t == '\t') t++;
  unsigned n = 0;
  while (*t >= '0' && *t <= '9' && n < 1000000) n = n * 10 + (unsigned)(*t++ - '0');
  return n;
}

/* May this thread dlopen right here, inside malloc? Only if no other
 * thread exists (none can hold the loader's lock, or a lock of the
 * program's that a library constructor run by the load would wait for)
 * and this thread is not the loader itself allocating mid-dlopen, with
 * the link map half built: ld.so calls malloc directly, so that shows as
 * a frame of ld.so among the walked ones. A library constructor of the
 * program's may be on the stack further out: a dlopen from a constructor
 * is allowed. (__libc_single_threaded and _r_debug.r_state would say as
 * much without a system call, but each imported symbol costs every
 * process a lookup at start: +2.8k instructions a /bin/true.) */
static bool bt_unw_inline_safe(void *const *walked, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    if (bt_in_ldso((uintptr_t)walked[i])) return false;
  return bt_threads() == 1;
}

/* The first walk that needs libunwind loads it: inline when that is safe
 * (bt_unw_inline_safe: a single-threaded program, the usual case), else
 * in a loader thread of nalloc's, which this walk waits for. That wait is
 * bounded: the load waits for the loader's lock, and a thread holding it
 * may be running a library constructor that waits for a lock this thread
 * holds. Only then (a wait of BT_UNW_WAIT_NS) does this stack end at the
 * caller, as any stack does where libunwind cannot be loaded, and so do
 * the stacks that need it until the load, which goes on, is done: no
 * other walk waits. */
#define BT_UNW_WAIT_NS 2000000000ull
static NALLOC_NOINLINE bt_unw_fn_t bt_unw_get(void *const *walked, unsigned n) {
  if (!atomic_load_explicit(&bt_unw_lazy, memory_order_acquire)) return NULL;
  unsigned st = BT_UNW_IDLE;
  if (atomic_compare_exchange_strong(&bt_unw_state, &st, BT_UNW_LOADING)) {
    if (bt_unw_inline_safe(walked, n)) {
      bt_unw_load();
    } else {
      int err = helper_thread_start(bt_unw_loader, 0);
      if (err != 0) {
        nalloc_log("prof: no thread to load %s (errno %d): stacks the DWARF rules "
                   "cannot walk end at the caller", NALLOC_UNWIND_SONAME, err);
        atomic_store_explicit(&bt_unw_state, BT_UNW_DONE, memory_order_release);
      }
    }
    st = atomic_load_explicit(&bt_unw_state, memory_order_acquire);
  }
  /* once a wait has timed out, later walks do not wait while the load is
   * still under way (the thread that holds the loader's lock may be
   * waiting for this one again) */
  static _Atomic bool timed_out;
  if (st == BT_UNW_LOADING && !atomic_load_explicit(&timed_out, memory_order_relaxed)) {
    uint64_t t0 = nalloc_now_ns();
    while (atomic_load_explicit(&bt_unw_state, memory_order_acquire) == BT_UNW_LOADING) {
      if (nalloc_now_ns() - t0 > BT_UNW_WAIT_NS) {
        if (!atomic_exchange(&timed_out, true))
          nalloc_log("prof: loading %s takes over %llu ms (the loader's lock is held): "
                     "a stack the DWARF rules cannot walk ends at the caller until it is "
                     "loaded", NALLOC_UNWIND_SONAME, BT_UNW_WAIT_NS / 1000000);
        return NULL;
      }
      struct timespec ts = {0, 100000}; /* 0.1 ms: ~1% of a load */
      nanosleep(&ts, NULL);
    }
  }
  return atomic_load_explicit(&bt_unw_backtrace, memory_order_acquire);
}

/* When the profiler starts (the library constructor), libunwind is loaded
 * only for prof_unwind:libunwind, which needs it for every stack. With
 * dwarf, from now on the first walk that needs it loads it (bt_unw_get):
 * before this point (the loader still relocating and initialising
 * libraries) no load is tried. Loading it here cost every prof:true
 * process ~170k instructions and 24 system calls: a /bin/true took
 * 335,429 instructions and 65 calls, now 165,473 and 41 (unprofiled
 * 158,316 and 41; callgrind, strace -f). libunwind's global set-up (memory pool,
 * address-validation pipe, signal-masked locks) and the executable-mapping
 * table are built by the first walk that needs them. */
void prof_bt_prime(void) {
  if (opt_prof_unwind == PROF_UNWIND_LIBUNWIND) {
    atomic_store_explicit(&bt_unw_state, BT_UNW_LOADING, memory_order_relaxed);
    bt_unw_load();
  }
  atomic_store_explicit(&bt_unw_lazy, true, memory_order_release);
}
