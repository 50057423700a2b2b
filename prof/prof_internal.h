/* prof_internal.h -- what the profiler's own files share: options, the
 * three record types (gctx, tdata, tctx), locks, and the functions each
 * prof_*.c file offers the others. alloc/ never includes this; it sees only
 * prof_hook.h.
 *
 * Ownership and locking in one place (the "why" behind every file):
 *   gctx  one per unique backtrace, in a global hash (prof_gctx_lock) and
 *         on an append-only list that dumps read without a lock. A gctx is
 *         never freed, so a dump never has to pin it; memory grows with the
 *         number of distinct stacks, as gperftools' buckets do.
 *   tdata one per thread (and per thread after each prof.reset), on the
 *         tdatas list (prof_tdatas_lock). Its bt->tctx hash is private to
 *         the owning thread: no lock on the sampled path.
 *   tctx  counters of one backtrace as allocated by one thread. The owner
 *         thread is the only writer of its `alloc` and `freed` counters
 *         (plain load+store through relaxed atomics: no locked instruction
 *         in exact mode); frees from other threads add to the separate
 *         `remote` counters with atomic fetch_add. Live = alloc - freed -
 *         remote, and alloc is also the cumulative total, so a malloc
 *         and a free each move two counters. We chose this over
 *         jemalloc's "tdata lock around every update" because an exact
 *         profile updates counters on every malloc and free, and an
 *         uncontended lock pair costs more than the whole counter update.
 *         A tctx lives as long as its tdata.
 * Lock order: prof_dump_lock < prof_tdatas_lock < prof_gctx_lock < base.
 * None of them is taken on the allocation path except on a thread's first
 * sample (tdata creation) and a thread's first sample of a new stack. */
#ifndef PROF_INTERNAL_H
#define PROF_INTERNAL_H

#include "prof_hook.h"

#include <signal.h>

#define PROF_DEPTH_MAX 256   /* cap for opt.prof_depth */
#define PROF_SKIP_MAX 32     /* nalloc frames we look through for `caller` */
#define PROF_NAME_MAX 64     /* thread.prof.name, including the NUL */
#define PROF_PREFIX_MAX 256  /* opt.prof_prefix, including the NUL */
#define PROF_LG_MAX 62
#define PROF_FP 10           /* fixed-point bits of the unbiased counts */

enum { PROF_UNWIND_DWARF = 0, PROF_UNWIND_LIBUNWIND = 1, PROF_UNWIND_FP = 2 };
enum { PROF_FORMAT_GPERFTOOLS = 0, PROF_FORMAT_JEMALLOC = 1 };

/* ---- options (NALLOC_CONF; rows in prof_ctl.c) --------------------------- */
extern bool opt_prof_active;
extern bool opt_prof_thread_active_init;
extern unsigned opt_lg_prof_sample;
extern ssize_t opt_lg_prof_interval;
extern bool opt_prof_gdump;
extern bool opt_prof_final;
extern bool opt_prof_leak;
extern char opt_prof_prefix[PROF_PREFIX_MAX];
extern unsigned opt_prof_unwind;
extern unsigned opt_prof_depth;
extern unsigned opt_prof_format;
extern int opt_prof_signal;

/* ---- run-time switches (ctl) ------------------------------------------- */
extern _Atomic bool prof_active;
extern _Atomic bool prof_thread_active_init;
extern _Atomic bool prof_gdump_on;
extern _Atomic unsigned prof_lg_sample; /* changed only by prof.reset */

/* ---- records ------------------------------------------------------------ */
/* One counter set: objects, requested bytes, and the unbiased estimates of
 * both (objects in 1/2^PROF_FP units). In exact mode only objs/bytes move. */
enum { C_OBJS, C_BYTES, C_UOBJS, C_UBYTES, C_N };
typedef struct prof_cnt_s {
  uint64_t v[C_N];
} prof_cnt_t;

typedef struct prof_gctx_s {
  struct prof_gctx_s *next_all; /* global list, newest first */
  struct prof_gctx_s *next_hash;
  uint64_t id;   /* creation order: dumps sort by it */
  uint64_t hash;
  /* cumulative counters of destroyed tdatas, so [alloc] totals survive the
   * threads that made them (zeroed by prof.reset) */
  _Atomic uint64_t retired[C_N];
  unsigned nframes;
  void *pcs[];
} prof_gctx_t;

/* Three cache lines (base_alloc aligns them): what is read on every
 * update, the owner's counters, and other threads' counters, so that
 * neither another thread's tctx nor a remote free touches the line the
 * owner writes on each malloc and free. */
struct prof_tdata_s;
typedef struct prof_tctx_s {
  struct prof_tdata_s *tdata;
  prof_gctx_t *gctx;
  struct prof_tctx_s *next; /* tdata's list, published with release */
  uint64_t hash;
  unsigned lg;              /* sample rate its counters were made with */
  _Alignas(CACHELINE) _Atomic uint64_t alloc[C_N]; /* allocated ever, owner only */
  _Atomic uint64_t freed[C_N];  /* freed by the owner, owner only */
  _Alignas(CACHELINE) _Atomic uint64_t remote[C_N]; /* freed by other threads
                                                       (fetch_add) */
} prof_tctx_t;

/* A recorded dwarf walk (prof_bt.c): its start, and the stack words it
 * read, so that the same stack can be recognised by re-reading them. */
#define PROF_WALKS 4
#define PROF_WALK_WORDS 48
#define PROF_WALK_NONE ((unsigned)-1) /* not replayable */
typedef struct {
  uintptr_t addr, val;
} prof_walk_word_t;
typedef struct {
  uintptr_t pc, sp, bp;
  struct prof_tctx_s *tctx; /* NULL: empty */
  unsigned nwords;
  prof_walk_word_t word[PROF_WALK_WORDS];
} prof_walk_t;

typedef struct prof_tdata_s {
  /* on lines of its own (base_alloc): the owner writes it when sampling */
  _Alignas(CACHELINE) struct prof_tdata_s *next, *prev; /* tdatas list
                                                 (prof_tdatas_lock) */
  uint64_t uid;                     /* tN in the jemalloc format */
  unsigned lg;
  bool exact;                       /* lg 0 and no interval dumps: every
                                       request is sampled, nothing drawn */
  _Atomic bool active;              /* thread.prof.active */
  _Atomic bool detached;            /* thread gone (or replaced) */
  _Atomic bool expired;             /* prof.reset since creation */
  bool reclaim;                     /* dump: free after this snapshot */
  uint64_t prng;
  int64_t last_wait;                /* countdown we handed out last */
  uint64_t iacc;                    /* bytes not yet added to the interval */
  uintptr_t stk_lo, stk_hi;         /* stack mapping, for the fp walker */
  uintptr_t code_seen[64];          /* fp walker: return addresses known to
                                       be code (direct-mapped by address) */
  uintptr_t code_bad;               /* fp walker: the last one that was not */
  prof_tctx_t **tab;                /* owner-private bt -> tctx hash */
  prof_tctx_t *last;                /* the last lookup's answer: loops
                                       allocate from one stack in a row */
  prof_walk_t walks[PROF_WALKS];    /* dwarf: recent walks, by (pc, sp) */
  size_t tab_cap, tab_n;
  _Atomic(prof_tctx_t *) tctxs;     /* every tctx, newest first */
  _Atomic size_t ntctx;
  char name[PROF_NAME_MAX];         /* prof_tdatas_lock */
} prof_tdata_t;

extern nlock_t prof_dump_lock, prof_tdatas_lock, prof_gctx_lock;

/* ---- prof_math.c -------------------------------------------------------- */
double prof_ln(double x);
double prof_exp(double x);
uint64_t prof_prng_next(uint64_t *state);
int64_t prof_draw_wait(uint64_t *state, unsigned lg);
void prof_unbias_one(size_t size, unsigned lg, uint64_t *uobjs,
                     uint64_t *ubytes);
void prof_invert(uint64_t uobjs, uint64_t ubytes, unsigned lg, uint64_t *n,
                 uint64_t *b);

/* ---- prof_bt.c ---------------------------------------------------------- */
/* The tctx of the current stack (NULL: out of metadata memory). `frame`:
 * a frame pointer of nalloc's between `caller` and here. */
prof_tctx_t *prof_bt_tctx_slow(prof_tdata_t *td, const void *caller,
                               const void *frame);
/* A stack the thread's recent walks do not know, from the caller's rsp
 * and rbp: walk it, look it up, and remember the walk in `w`. */
prof_tctx_t *prof_bt_walk_new(prof_tdata_t *td, const void *caller,
                              uintptr_t sp, uintptr_t bp,
                              prof_walk_t *w);

/* Recorded dwarf walks, by call site and depth. */
static inline prof_walk_t *prof_walk_slot(prof_tdata_t *td, const void *caller,
                                          uintptr_t sp) {
  return &td->walks[((uintptr_t)caller ^ (sp >> 4)) % PROF_WALKS];
}

/* The same call site at the same depth, the same rbp, and the same words
 * on the stack: the same walk, without taking a step. */
static NALLOC_ALWAYS_INLINE NALLOC_NO_ASAN bool
prof_walk_same(const prof_walk_t *w, const void *caller, uintptr_t sp,
               uintptr_t bp) {
  if (w->pc != (uintptr_t)caller || w->sp != sp || w->bp != bp) return false;
  const prof_walk_word_t *x = w->word, *end = x + w->nwords;
  while (x < end && *(const uintptr_t *)x->addr == x->val) x++;
  return x == end;
}

/* Finds the frame of the nalloc entry point that `caller` called (the
 * frame whose return address is `caller`), at most `steps` frames above
 * `fp`, a frame inside the stack below `hi`. Only nalloc's own frames sit
 * between, and nalloc is built with frame pointers; each one is checked
 * (increasing, aligned, in the stack) before it is read. */
static NALLOC_ALWAYS_INLINE NALLOC_NO_ASAN bool
prof_entry_frame(uintptr_t fp, uintptr_t hi, const void *caller,
                 unsigned steps, uintptr_t *entry) {
  for (unsigned i = 0;; i++) {
    if (((void *const *)fp)[1] == caller) {
      *entry = fp;
      return true;
    }
    uintptr_t next = ((uintptr_t *)fp)[0];
    if (i == steps || next <= fp || next > hi - 16 || (next & 7)) return false;
    fp = next;
  }
}

/* prof_bt_tctx_slow's common case, inline in prof_sample: `frame` is the
 * entry point's frame (or one a step below it), and the stack is most
 * often one the thread walked just before. */
static NALLOC_ALWAYS_INLINE NALLOC_NO_ASAN prof_tctx_t *
prof_bt_tctx(prof_tdata_t *td, const void *caller, const void *frame) {
  uintptr_t fp = (uintptr_t)frame;
  if (likely(opt_prof_unwind == PROF_UNWIND_DWARF && fp >= td->stk_lo &&
             fp < td->stk_hi) &&
      prof_entry_frame(fp, td->stk_hi, caller, 1, &fp)) {
    uintptr_t sp = fp + 16, bp = ((uintptr_t *)fp)[0];
    prof_walk_t *w = prof_walk_slot(td, caller, sp);
    if (w->tctx != NULL && prof_walk_same(w, caller, sp, bp)) return w->tctx;
    return prof_bt_walk_new(td, caller, sp, bp, w);
  }
  return prof_bt_tctx_slow(td, caller, frame);
}
void prof_bt_prime(void);
void prof_bt_prefork(void);
void prof_bt_postfork_parent(void);
void prof_bt_postfork_child(void);

/* ---- prof_cfi.c --------------------------------------------------------- */
/* A cached rule for leaving the frame that return address pc is in:
 *   bits 0-2   kind: CFA = rsp + off, rbp + off, or *(rbp + off); END (the
 *              outermost frame: return address undefined); OTHER (not
 *              expressible here: ask libunwind)
 *   bit  3     rbp was saved, at CFA + 8 * (int8_t)bits 16-23 (< 0)
 *   bits 32-63 off (int32_t)
 * The return address is always at CFA - 8 (other rules are OTHER). */
enum { CFI_RSP = 1, CFI_RBP = 2, CFI_DEREF = 3, CFI_END = 4, CFI_OTHER = 5 };
typedef struct {
  _Atomic uintptr_t key; /* return address; 0: empty */
  _Atomic uint64_t rule;
} prof_cfi_slot_t;
typedef struct {
  size_t mask, n;
  prof_cfi_slot_t slot[];
} prof_cfi_tab_t;
extern _Atomic(prof_cfi_tab_t *) prof_cfi_tab;
uint64_t prof_cfi_miss(uintptr_t pc);

static inline size_t prof_cfi_hash(uintptr_t pc) {
  return (size_t)(((uint64_t)pc * 0x9e3779b97f4a7c15ull) >> 32);
}

/* Lock-free: a slot's rule is written before its key is published. */
static NALLOC_ALWAYS_INLINE uint64_t prof_cfi_rule(uintptr_t pc) {
  prof_cfi_tab_t *t = atomic_load_explicit(&prof_cfi_tab, memory_order_acquire);
  if (likely(t != NULL)) {
    for (size_t i = prof_cfi_hash(pc) & t->mask;; i = (i + 1) & t->mask) {
      uintptr_t k = atomic_load_explicit(&t->slot[i].key, memory_order_acquire);
      if (likely(k == pc))
        return atomic_load_explicit(&t->slot[i].rule, memory_order_relaxed);
      if (k == 0) break;
    }
  }
  return prof_cfi_miss(pc);
}
/* Around the profiler's calls into the loader (dl_iterate_phdr, directly
 * or through libunwind): fork waits for them (prof_cfi.c). */
void prof_loader_enter(void);
void prof_loader_exit(void);
void prof_cfi_prefork(void);
void prof_cfi_postfork_parent(void);
void prof_cfi_postfork_child(void);

/* ---- prof_data.c -------------------------------------------------------- */
prof_tdata_t *prof_tdata_get(tsd_t *tsd, bool create);
prof_tctx_t *prof_tctx_lookup(prof_tdata_t *td, void **pcs, unsigned n);
void prof_tdata_detach(tsd_t *tsd);
uint64_t prof_tdata_live(prof_tdata_t *td);
void prof_tdata_destroy_locked(prof_tdata_t *td, bool fold);
void prof_tctx_read(prof_tctx_t *t, prof_cnt_t *cur, prof_cnt_t *acc);
void prof_reset(unsigned lg);
extern prof_tdata_t *prof_tdatas;          /* prof_tdatas_lock */
extern _Atomic(prof_gctx_t *) prof_gctx_all;
extern _Atomic size_t prof_ntctx_total, prof_ngctx_total, prof_ntdata_total;
void prof_data_postfork_child(tsd_t *tsd);

/* ---- prof_dump.c -------------------------------------------------------- */
/* Writes a profile to `path`: 0 or an errno value (the open/write error).
 * With `leak`, first prints the leak summary from the same snapshot. */
int prof_dump_file(const char *path, bool leak);
/* The same profile (gperftools format) to an open descriptor, left open:
 * 0 or an errno value. For the HTTP server (prof_http.c). */
int prof_dump_fd(int fd);
/* Decimal/hex formatting without stdio. Return the length written. */
size_t prof_fmt_u64(char *buf, uint64_t v);
size_t prof_fmt_hex(char *buf, uint64_t v);

/* ---- prof_trigger.c ----------------------------------------------------- */
int prof_dump_request(const char *path); /* prof.dump ctl */
void prof_triggers_boot_late(void);
void prof_interval_account(tsd_t *tsd, prof_tdata_t *td, uint64_t bytes);
void prof_gdump_account(tsd_t *tsd, int64_t delta);
void prof_triggers_run_pending(tsd_t *tsd);
extern _Atomic unsigned prof_trigger_pending;
void prof_triggers_postfork_child(void);

#endif
