/* prof_internal.h -- what the profiler's own files share: options, the
 * record types (gctx, thread record, tdata, tctx), locks, and the
 * functions each prof_*.c file offers the others. alloc/ never includes
 * this; it sees only prof_hook.h.
 *
 * Ownership, lifetimes and locking in one place (the "why" behind every
 * file). All records come from prof_mem.c (never the profiled heap), which
 * gives the pages of freed records back to the OS.
 *   gctx  one per unique backtrace, in a global hash and on a global list
 *         (both prof_gctx_lock; dumps also read the list under
 *         prof_tdatas_lock, new ones are pushed at its head with release).
 *         `nref` counts the tctxs that point to it (prof_gctx_lock). `ret`
 *         (in its side record `ext`, made on first need)
 *         holds, per size bucket, the cumulative counts of its tctxs that
 *         were reclaimed, so [alloc] totals survive them. A gctx with
 *         nref 0 has nothing live and can gain nothing without a new tctx.
 *         A dump that finds a gctx with nref 0 and nothing new in `ret`
 *         since the previous dump (which wrote its final counts) leaves it
 *         out and frees it: a stack leaves the dumps, [alloc] totals and
 *         all, once a whole interval between two dumps passed with nothing
 *         of it live and nothing allocated. Only dumps free gctxs, holding
 *         every profiler lock, because a dump's sort and write phases use
 *         gctx pointers after prof_tdatas_lock is released.
 *   trec  a thread's record (uid, name, its tctxs): the first member of
 *         its tdata while the thread lives; when the thread exits with
 *         tctxs that still count live objects, they move to a small
 *         standalone trec on the dead list (the 4 KB tdata is freed at
 *         once). A standalone trec is freed with its last tctx, or once a
 *         dump has shown it: its tctxs then move to prof_orphans, the one
 *         record of exited threads' objects, which has no thread row.
 *   tdata one per thread (and per thread after each prof.reset), owner
 *         use only except the trec inside it. Its (stack, bucket) -> tctx
 *         hash, its walk cache (prof_bt.c) and `last` are private to the
 *         owner thread: no lock on the sampled path.
 *   tctx  counters of one backtrace and size bucket (sampled mode; one
 *         bucket in exact mode) as allocated by one thread on one NUMA
 *         node (the node of the thread's arena: thread.arena makes the
 *         thread start new tctxs, so a stack's figures split by the node
 *         of the memory with no per-allocation cost). The owner is
 *         the only writer of `alloc` and `freed` (relaxed load+store: no
 *         locked instruction in exact mode); other threads' frees add to
 *         `remote` with fetch_add. Live = alloc - freed - remote; alloc is
 *         also the cumulative total. We chose this over jemalloc's "tdata
 *         lock around every update" because an exact profile updates
 *         counters on every malloc and free, and an uncontended lock pair
 *         costs more than the whole counter update.
 *
 * When a tctx may be freed (reclaimed): a sampled slot of a live object
 * holds a tctx pointer, and a free in flight on another thread may hold
 * one it just took from a slot. So:
 *   - a free's LAST touch of a tctx is its objects counter (the owner's
 *     PC_FREED objects store, or PC_REMOTE objects fetch_add with release,
 *     which is the last of the remote adds); everything else it reads or
 *     writes (owner, lg, bucket, peak copy) comes before;
 *   - a tctx is freed only with prof_tdatas_lock held, after reading
 *     live == 0 under it: then no slot holds it and every free that
 *     counted against it has made its last touch;
 *   - and only by a thread that can be sure no new allocation will count
 *     against it: its owner (a sweep of its own tctxs, which also clears
 *     the owner-private table, walk cache and `last`), or anyone once the
 *     owner has exited (dead list sweeps, dumps);
 *   - a live-thread tctx is reclaimed when the last dump found nothing of
 *     it live and nothing was allocated from it since (PC_ALLOC objects
 *     equals `dumped`, which that dump wrote): that dump showed it in its
 *     final state. A dead thread's tctx is reclaimed as soon as nothing of
 *     it is live. Either way its cumulative counts go to the gctx's `ret`,
 *     so the stack's [alloc] totals stay whole while the gctx lives;
 *   - never while it holds the peak profile's copy (pk_epoch current with
 *     objects in pk).
 * Ownership tests compare a tctx's owner with the calling thread's tdata
 * address; a tdata lives as long as its thread (its trec may move, never
 * its address while the thread runs), so the comparison cannot match a
 * reused address during the call. A remote free never dereferences the
 * owner (a record that may be freed under it): whether the owner has
 * exited, it reads from the tctx's own `dead` flag.
 *
 * Lock order: prof_dump_lock < prof_tdatas_lock < prof_gctx_lock <
 * prof_mem's lock < base. None is taken on the allocation path except on
 * a thread's first sample (tdata creation), its first sample of a new
 * stack and bucket, the owner's sweep after a dump, and a remote free that
 * empties a dead thread's tctx (trylock only). */
#ifndef PROF_INTERNAL_H
#define PROF_INTERNAL_H

#include "prof_hook.h"

#include <signal.h>
#include <string.h>

#define PROF_DEPTH_MAX 256   /* cap for opt.prof_depth */
#define PROF_SKIP_MAX 32     /* nalloc frames we look through for `caller` */
#define PROF_NAME_MAX 64     /* thread.prof.name, including the NUL */
#define PROF_PREFIX_MAX 256  /* opt.prof_prefix, including the NUL */
#define PROF_LG_MAX 62
#define PROF_FP 10           /* fixed-point bits of the unbiased counts */

enum { PROF_UNWIND_DWARF = 0, PROF_UNWIND_LIBUNWIND = 1, PROF_UNWIND_FP = 2 };
enum { PROF_FORMAT_GPERFTOOLS = 0, PROF_FORMAT_JEMALLOC = 1 };

/* ---- options (NALLOC_CONF; rows in prof.c, prof_peak.c) ------------------ */
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
extern bool opt_prof_peak;
extern bool opt_prof_peak_final;

/* ---- run-time switches (ctl) ------------------------------------------- */
extern _Atomic bool prof_active;
extern _Atomic bool prof_thread_active_init;
extern _Atomic bool prof_gdump_on;
extern _Atomic unsigned prof_lg_sample; /* changed only by prof.reset */
/* Reasons to leave the plain exact-mode path, in one word that the
 * sampled path reads once: */
enum {
  PROF_SLOW_GDUMP = 1,   /* prof.gdump on: track the live total */
  PROF_SLOW_PENDING = 2, /* an automatic dump waits (prof_trigger.c) */
  PROF_SLOW_PEAK = 4,    /* peak profile kept (prof_peak.c) */
  PROF_SLOW_OFF = 8,     /* fork child: the profiler was mid-update in the
                            forking thread and is off (prof_postfork_child):
                            frees of sampled blocks leave the records alone */
};
extern _Atomic unsigned prof_slow;

/* ---- records ------------------------------------------------------------ */
/* One counter set: objects, requested bytes, and the unbiased estimates of
 * both (objects in 1/2^PROF_FP units). In exact mode only objs/bytes move.
 * A sampled tctx's own sets hold, in place of the estimates, the terms
 * they are made from (prof_unbias_terms); prof_tctx_read hands out the
 * estimates, and every prof_cnt_t outside a tctx holds those. */
enum { C_OBJS, C_BYTES, C_UOBJS, C_UBYTES, C_N };
typedef struct prof_cnt_s {
  uint64_t v[C_N];
} prof_cnt_t;

/* Size buckets of requested sizes (sampled mode): 0-15 bytes one each,
 * then four per doubling. The readers unbias each line by its average
 * object size, so a line must not mix sizes far apart (issue 13): with a
 * quarter of a doubling per line the average is within 25% of every size
 * in it and the readers' estimate within rounding of ours. */
#define PROF_NBKT 256
static inline unsigned prof_bkt(size_t size) {
  if (size < 16) return (unsigned)size;
  unsigned lg = 63u - (unsigned)__builtin_clzll((unsigned long long)size);
  return 16 + (lg - 4) * 4 + (unsigned)((size >> (lg - 2)) & 3);
}

/* Cumulative counts of a gctx's reclaimed tctxs, one per size bucket and
 * NUMA node (and their temporary allocations: see prof_tctx_t.temp). */
typedef struct prof_ret_s {
  struct prof_ret_s *next;
  unsigned bkt, node;
  uint64_t acc[C_N];
  uint64_t temp;
} prof_ret_t;

/* Lifetimes of sampled objects (sampled mode): bucket 0 under 2^10 ns
 * (about 1 us), then one bucket per factor of 4, the last one open:
 * bucket k >= 1 holds [2^(8+2k), 2^(10+2k)) ns, bucket 13 everything from
 * 2^34 ns (17 s) up. Powers of 4 keep the histogram on half a cache line
 * while spanning a microsecond to minutes. */
#define PROF_LIFE_N 14
typedef struct prof_life_s {
  _Atomic uint32_t n[PROF_LIFE_N];
} prof_life_t;
static inline unsigned prof_life_bkt(uint64_t ns) {
  if (ns < 1024) return 0;
  unsigned lg = 63u - (unsigned)__builtin_clzll((unsigned long long)ns);
  unsigned k = (lg - 10) / 2 + 1;
  return k < PROF_LIFE_N ? k : PROF_LIFE_N - 1;
}

/* The frames of a stack beyond its first PROF_LEAF, shared by every stack
 * that ends the same way (interned; prof_gctx_lock), in chunks of
 * PROF_TAIL_CHUNK frames counted from the outermost frame in (the chunk
 * next to the leaf part holds the rest, 1 to PROF_TAIL_CHUNK frames), each
 * chunk shared by every tail that ends the same way from there. Deep stacks
 * differ near the leaf and share their roots: CPython's 17k distinct stacks
 * of 76 frames on average (1.3M frames, 10 MB) have 1k distinct tails past
 * frame 16 (61k frames). Whole tails were still 8.5 MB for cc1plus's 86k
 * stacks (18k tails of ~34 frames that differ near frame 16); chunks of 12
 * frames (128 bytes each) took 2.9 MB. Counted from the root, chunks are
 * shared by stacks of any depth that end the same way, not only by those
 * whose depths differ by a multiple of 12. With prof_mem's classes in
 * 64-byte steps, 8 leaf frames (a 128-byte gctx) and chunks of 12 took
 * the least (computed from exact dumps, gctxs and chunks: CPython's tests
 * 9.79 -> 7.42 MB, cc1plus 19.47 -> 16.23 MB); with 32-byte steps to 256,
 * a 56-byte head (ret and life moved to prof_gext_t) and 5 leaf frames (a
 * 96-byte gctx) take less: CPython's tests' 58.6k stacks 8.82 -> 7.71 MB
 * (computed the same way; 7.51 with chunks of 8, 96 bytes, measured 0.2
 * MB less, but a new stack's tail is then ~8 chunks to intern instead of
 * ~5: python3 -c pass, exact, +1.8% instructions against +0.5%; a 48-byte
 * head and 6 leaf frames would take 7.37 MB). */
#define PROF_LEAF 5
#define PROF_TAIL_CHUNK 12
typedef struct prof_tail_s {
  struct prof_tail_s *next_hash;
  struct prof_tail_s *up; /* the frames after these (NULL: no more) */
  uint64_t hash;          /* of pcs[] and up */
  uint32_t nref;          /* gctxs and chunks using it */
  uint32_t n;             /* at most PROF_TAIL_CHUNK */
  void *pcs[];
} prof_tail_t;
_Static_assert(sizeof(prof_tail_t) + PROF_TAIL_CHUNK * sizeof(void *) == 128,
               "a chunk of a tail is 128 bytes, one of prof_mem's classes");

/* What few gctxs need, made on first need (gctx_ext, a CAS: lifetimes are
 * added by any freeing thread without a lock). */
typedef struct prof_gext_s {
  prof_ret_t *ret; /* prof_tdatas_lock */
  /* Sampled objects of this stack by lifetime (prof_life_bkt), added by
   * whichever thread frees one (fetch_add: sampled frees are rare). Kept
   * per stack rather than per tctx: no tctx grows a cache line for it, and
   * the stack outlives its tctxs. All 0 in exact mode. */
  prof_life_t life;
} prof_gext_t;

/* 56 bytes and the first PROF_LEAF frames: 96 bytes, one of prof_mem's
 * 32-byte classes (with an 80-byte header and 16 frames it took 256:
 * CPython's tests make ~59k of them in exact mode; 128 with a 64-byte
 * head and 8 frames). */
typedef struct prof_gctx_s {
  struct prof_gctx_s *next_all; /* global list, newest first */
  struct prof_gctx_s *next_hash;
  uint64_t id;   /* creation order: dumps sort by it */
  uint64_t hash;
  prof_tail_t *tail; /* frames PROF_LEAF.. (NULL: no more) */
  /* The counts of its reclaimed tctxs and its objects' lifetimes: NULL
   * until a tctx is reclaimed with counts or a sampled object with a
   * birth time is freed (exact mode's stacks are many, and few of them
   * ever need it). */
  _Atomic(prof_gext_t *) ext;
  uint32_t nref;     /* tctxs pointing here (prof_gctx_lock) */
  uint16_t nframes;  /* all of them (at most PROF_DEPTH_MAX) */
  bool ret_new;      /* ext->ret holds counts no dump has written yet */
  bool idle;         /* the last dump found nothing pointing here and
                        nothing new in ret: reaped after it */
  void *pcs[];       /* the first min(nframes, PROF_LEAF) */
} prof_gctx_t;
_Static_assert(sizeof(prof_gctx_t) + PROF_LEAF * sizeof(void *) == 96 &&
                   PROF_DEPTH_MAX <= UINT16_MAX,
               "a gctx with PROF_LEAF frames is 96 bytes");

static inline void *prof_gctx_pc(const prof_gctx_t *g, unsigned i) {
  if (i < PROF_LEAF) return g->pcs[i];
  const prof_tail_t *t = g->tail;
  for (i -= PROF_LEAF; i >= t->n; t = t->up) i -= t->n;
  return t->pcs[i];
}

struct prof_tctx_s;
/* A thread's record; see the ownership notes at the top. */
typedef struct prof_trec_s {
  struct prof_trec_s *next, *prev; /* live or dead list (prof_tdatas_lock) */
  _Atomic(struct prof_tctx_s *) tctxs; /* newest first: the owner pushes
                                          (release); unlinks hold
                                          prof_tdatas_lock */
  _Atomic size_t ntctx;
  uint64_t uid;                    /* tN in the jemalloc format */
  _Atomic bool detached;           /* standalone: the thread is gone */
  _Atomic bool expired;            /* prof.reset since creation */
  bool in_tdata;                   /* the first member of a tdata */
  char name[PROF_NAME_MAX];        /* prof_tdatas_lock */
} prof_trec_t;

/* Counter sets of a tctx (prof_tctx_cnt): allocated ever and freed by
 * the owner (owner only), freed by other threads (fetch_add), and live at
 * the peak (prof_peak.c). */
enum { PC_ALLOC, PC_FREED, PC_REMOTE, PC_PK, PC_NSETS };
/* Counts in each set: C_N when sampling, objects and bytes only in exact
 * mode (lg 0), whose unbiased counts are the raw ones. */
#define PROF_EXACT_NC 2

/* Sampled: three cache lines (prof_mem aligns them): what is read on every
 * update, the owner's counters, and other threads' counters plus the peak
 * copy, so that neither another thread's tctx nor a remote free touches
 * the line the owner writes on each malloc and free. Exact mode (lg 0)
 * keeps two counts a set right after the 48-byte head: 96 bytes (three
 * sets; prof_mem has 32-byte classes up to 256), 128 with the peak
 * profile (its PC_PK set and epoch after them), for a program with many
 * stacks (CPython's tests: 48k tctxs, 9.5 MB at three lines, 6.2 MB at
 * two), at the price of remote frees sharing the lines the owner writes
 * and of records that share a line with their neighbours in the slab
 * (the owner's, mostly). The owner's table keys it by (stack, bucket,
 * node): prof_tctx_hash, from the gctx's hash (no field of its own). */
typedef struct prof_tctx_s {
  _Atomic(prof_trec_t *) owner;
  prof_gctx_t *gctx;
  struct prof_tctx_s *next; /* owner record's list, published with release */
  uint8_t lg;               /* sample rate its counters were made with */
  uint8_t bkt;              /* size bucket (0 in exact mode) */
  uint8_t node;             /* NUMA node of the memory it counts: the node
                               of its thread's arena when it was made (a
                               thread's blocks all come from its arena, and
                               thread.arena starts new tctxs) */
  _Atomic bool dead;        /* its thread has exited: alloc and freed are
                               frozen (set with release) */
  uint16_t gen;             /* prof_reset_gen when made: older ones were
                               forgotten by prof.reset */
  uint64_t dumped;          /* allocated objects when the last dump found
                               nothing live; UINT64_MAX: it did not */
  /* Exact mode: objects the owner freed before it allocated anything else
   * (heaptrack's "temporary" allocations). Owner only; in the head, which
   * had room, because it changes only on such frees. */
  _Atomic uint64_t temp;
  union {
    struct { /* sampled (lg > 0) */
      _Atomic uint64_t pk_epoch; /* the PC_PK set holds the live counts at
                                    this peak */
      uint64_t pad_;
      /* PC_ALLOC, PC_FREED | PC_REMOTE, PC_PK, C_N each: offset 64 */
      _Atomic uint64_t cnt[PC_NSETS * C_N];
    } s;
    struct { /* exact (lg 0): PC_ALLOC, PC_FREED, PC_REMOTE, PROF_EXACT_NC
                each, then with prof_peak only (prof_tctx_size) PC_PK and
                its epoch */
      _Atomic uint64_t cnt[PC_NSETS * PROF_EXACT_NC];
      _Atomic uint64_t pk_epoch;
    } x;
  } u;
} prof_tctx_t;
_Static_assert(offsetof(prof_tctx_t, u) == 48 &&
                   offsetof(prof_tctx_t, u.s.cnt) == CACHELINE &&
                   sizeof(prof_tctx_t) == 3 * CACHELINE &&
                   2 * C_N * sizeof(uint64_t) == CACHELINE &&
                   offsetof(prof_tctx_t, u.x.cnt) +
                           PC_PK * PROF_EXACT_NC * sizeof(uint64_t) == 96 &&
                   offsetof(prof_tctx_t, u.x.pk_epoch) + 8 <= 2 * CACHELINE,
               "a tctx is 3 lines sampled (counters from the second line), "
               "96 bytes exact, 128 exact with the peak profile");

/* Counts a set of t holds (its layout is fixed by its lg). */
static inline unsigned prof_tctx_nc(const prof_tctx_t *t) {
  return t->lg != 0 ? C_N : PROF_EXACT_NC;
}
/* Set `set` of t (PC_*): its counts, indexed by C_OBJS.. (PC_PK of an
 * exact-mode tctx only with opt_prof_peak: prof_tctx_size). */
static inline _Atomic uint64_t *prof_tctx_cnt(prof_tctx_t *t, unsigned set) {
  nalloc_assert(set != PC_PK || t->lg != 0 || opt_prof_peak);
  return t->lg != 0 ? &t->u.s.cnt[set * C_N] : &t->u.x.cnt[set * PROF_EXACT_NC];
}
/* The same in exact mode (t->lg == 0 known): no branch on the hot paths. */
static inline _Atomic uint64_t *prof_tctx_xcnt(prof_tctx_t *t, unsigned set) {
  return &t->u.x.cnt[set * PROF_EXACT_NC];
}
/* The epoch of t's PC_PK set: kept only with opt_prof_peak (PROF_SLOW_PEAK
 * set), as the set itself. */
static inline _Atomic uint64_t *prof_tctx_pk_epoch(prof_tctx_t *t) {
  nalloc_assert(opt_prof_peak);
  return t->lg != 0 ? &t->u.s.pk_epoch : &t->u.x.pk_epoch;
}
/* Counts read from an exact-mode tctx (which keeps objects and bytes
 * only): its unbiased values are the raw ones. */
static inline void prof_cnt_exact(prof_cnt_t *c) {
  c->v[C_UOBJS] = c->v[C_OBJS] << PROF_FP;
  c->v[C_UBYTES] = c->v[C_BYTES];
}
static inline size_t prof_tctx_size(unsigned lg) {
  if (lg != 0) return sizeof(prof_tctx_t);
  return opt_prof_peak ? offsetof(prof_tctx_t, u.x.pk_epoch) + sizeof(uint64_t)
                       : offsetof(prof_tctx_t, u.x.cnt[PC_PK * PROF_EXACT_NC]);
}
_Static_assert(NODE_MAX <= 256, "a node fits in prof_tctx_t.node");

/* A recorded dwarf walk (prof_bt.c): its start, and the stack words it
 * read, so that the same stack can be recognised by re-reading them.
 * Recorded walks are kept by (call site, depth): with 16 sets of two,
 * which of them collided turned on where the stack starts (the
 * environment's size): CPython's test_json walked 170k to 486k of its 3.3M
 * allocations depending on it (callgrind); with 64 sets, 126k (267k with
 * 16 sets at the same start), cc1plus 1.54M instead of 1.78M. */
#define PROF_WALK_SETS_LG 6 /* sqlite3 cycles through ~20 stacks a statement:
                                with 4 sets it walked nearly every one */
#define PROF_WALKS (2 << PROF_WALK_SETS_LG) /* two ways a set */
#define PROF_WALK_WORDS 64
_Static_assert(PROF_WALK_WORDS % 4 == 0, "a walk record pads its words to a multiple of four");
#define PROF_WALK_NONE ((unsigned)-1) /* not replayable */
typedef struct {
  uintptr_t addr, val;
} prof_walk_word_t; /* a word the walk read (its scratch, prof_bt.c) */
/* Recorded words are kept as their values and their addresses' offsets
 * from a base (a walk record's: its sp; the suffix record's: its stack
 * bound hi), 12 bytes a word instead of 16: a replay reads a record's
 * lines on every allocation, and those lines are what exact mode costs
 * the program on deep stacks (prof/README.md: test_json's own D1 misses
 * rise by as many as the replay's). The offsets fit: bt_dwarf walks only
 * stacks whose words lie within INT32_MAX bytes of hi. */
typedef struct {
  uintptr_t val[PROF_WALK_WORDS];
  int32_t off[PROF_WALK_WORDS];
} prof_walk_rec_t;
typedef struct {
  uintptr_t pc, sp, bp;
  struct prof_tctx_s *tctx; /* NULL: empty */
  bool bp_in;               /* some rule used the caller's rbp as it was at
                               the call (else it is not part of the key:
                               code without frame pointers keeps data in
                               rbp, different at every call) */
  unsigned nwords;          /* of *word: the innermost ones, padded to a
                               multiple of four (bt_dwarf) */
  /* A walk that read more than PROF_WALK_WORDS words keeps the innermost
   * ones here and finds the rest in the suffix cache: the words of its
   * frame sfx_c (td->sfx's words [0, f[sfx_c].wend)), while that frame is the
   * one this walk left there (td->sfx.ver[sfx_c] == sfx_ver: a later walk
   * that rewrites it, or any frame further out, gives it a new version).
   * PROF_WALK_NOSFX: *word holds every word. */
  unsigned sfx_c;
  uint64_t sfx_ver;
  /* its words: one of td->walk_word[], apart from the heads so that a
   * reused tdata needs only its heads zeroed (PROF_TDATA_ZERO); a pointer,
   * not an index: indexing cost test_json's replays 8 instructions an
   * allocation. Handed out in order when the head first records a walk
   * (NULL until then), so that a thread with a few stacks touches a page
   * or two of the 96 KiB, not a page a stack. Offsets from sp. */
  prof_walk_rec_t *word;
} prof_walk_t;
#define PROF_WALK_NOSFX ((unsigned)-1)

/* The thread's last full dwarf walk, outermost frame first, kept so that
 * a later walk that reaches one of its frames (same return address, same
 * rsp, and rbp if the rest of the walk read it) can take the frames above
 * from it once the stack words those frames read are checked unchanged
 * (prof_bt.c: the suffix cache). Deep stacks differ near the leaf and
 * share their outer frames (an interpreter's loop, main). */
#define PROF_SFX_WORDS (3 * PROF_DEPTH_MAX) /* at most 3 reads a frame */
typedef struct {
  uintptr_t sp, bp;     /* the walk's state on reaching this frame */
  uint64_t h;           /* prof_bt_hash_step over this frame's pc and
                           every outer one's */
  uint16_t wend;        /* word[0, wend): what the walk read from this
                           frame outward */
  bool bp_live;         /* the walk from here used bp as it was here */
} prof_sfx_frame_t;
typedef struct {
  uintptr_t hi;   /* the stack bound the walk checked against */
  unsigned n;     /* frames (0: none) */
  bool cut;       /* stopped at the depth limit: f[0] is not the root */
  uint64_t gen;   /* walks that wrote frames here: the next version */
  /* The arrays are used from their starts but pc from its end, so pc's
   * end, ver's and off's starts share a page: a shallow walk touches
   * three of the 21 KB's pages (four in the order f, ver, pc, val, off). */
  prof_sfx_frame_t f[PROF_DEPTH_MAX];
  /* f[r]'s return address at pc[PROF_DEPTH_MAX - 1 - r]: the frames from
   * any one out lie leaf first, as a walk's result does (one memcpy) */
  uintptr_t pc[PROF_DEPTH_MAX];
  /* the walk (gen) that wrote f[r] last. A walk writes every frame from
   * its join inward and none further out, so while ver[r] is unchanged
   * f[0, r] and word[0, f[r].wend) are too: a replay record that counts
   * on them checks this one number */
  uint64_t ver[PROF_DEPTH_MAX];
  /* the words, offsets from hi (so at most 0) */
  int32_t off[PROF_SFX_WORDS];
  uintptr_t val[PROF_SFX_WORDS];
} prof_sfx_t;
/* A walk in progress, leaf first (prof_bt.c's scratch): each frame's
 * state, the index of its first word read and of its saved-rbp word. */
typedef struct {
  uintptr_t sp, bp;
  uint16_t k0, bpw; /* bpw: PROF_SFX_WORDS if rbp was not restored */
  bool use_bp;      /* the frame's rule read bp */
} prof_bt_frame_t;

/* The stack hash: folded from the outermost frame in, so that the hash of
 * a walk that took its outer frames from the suffix cache starts from the
 * cached frame's state (prof_data.c hashes every stack this way). */
#define PROF_BT_HASH_SEED 0x84222325cbf29ce4ull
static inline uint64_t prof_bt_hash_step(uint64_t h, uintptr_t pc) {
  h ^= (uint64_t)pc;
  h *= 0x9e3779b97f4a7c15ull;
  return h ^ (h >> 29);
}
static inline uint64_t prof_bt_hash_fin(uint64_t h, unsigned n) {
  h ^= (uint64_t)n * 0xd6e8feb86659fd93ull;
  h *= 0x9e3779b97f4a7c15ull;
  return h ^ (h >> 32);
}

/* prof_tdata_t.attn: the owner's sampled path reads this one word and
 * looks further only when it is not 0. */
enum { PROF_ATTN_EXPIRED = 1, PROF_ATTN_SWEEP = 2 };

typedef struct prof_tdata_s {
  prof_trec_t rec;                  /* first: tctx owner == this address */
  /* on lines of its own (prof_mem): the owner writes them when sampling */
  _Alignas(CACHELINE) _Atomic uint8_t attn; /* PROF_ATTN_* */
  bool exact;                       /* lg 0 and no interval dumps: every
                                       request is sampled, nothing drawn */
  uint8_t want_bkt;                 /* bucket of the request being sampled */
  uint8_t node;                     /* NUMA node of the thread's arena: the
                                       node its new tctxs count */
  unsigned lg;
  _Atomic bool active;              /* thread.prof.active */
  uint64_t prng;
  int64_t last_wait;                /* countdown we handed out last */
  uint64_t iacc;                    /* bytes not yet added to the interval */
  int64_t pk_d, pk_hi, pk_lo;       /* peak: unpublished live bytes and the
                                       bounds that call prof_peak.c */
  uintptr_t stk_lo, stk_hi;         /* stack mapping, for the fp walker */
  uintptr_t code_seen[64];          /* fp walker: return addresses known to
                                       be code (direct-mapped by address) */
  uintptr_t code_bad;               /* fp walker: the last one that was not */
  uintptr_t *tab;                   /* owner-private (bt, bucket) -> tctx,
                                       tagged (prof_data.c) */
  prof_tctx_t *last;                /* the last lookup's answer: loops
                                       allocate from one stack in a row */
  prof_walk_t walks[PROF_WALKS];    /* dwarf: recent walks, by (pc, sp) */
  uint8_t walk_lru[PROF_WALKS / 2]; /* per set: the way to replace next */
  size_t tab_cap, tab_n;
  unsigned walk_nrec;               /* walk_word[] handed out (prof_bt.c) */
  /* From sfx.f on, nothing is read before it is written (a record's frames
   * and words below sfx.n, a walk's words once its head names a tctx, the
   * walk's scratch), so a tdata is zeroed only up to there: the walk
   * caches are ~138 KB of the ~147 KB, and zeroing all of a reused tdata
   * cost bench-threads -s 0.2 (prof:true) 32% more instructions. Of the
   * walk heads before it, only `tctx` is cleared (tdata_create). */
  prof_sfx_t sfx;                   /* dwarf: the last full walk */
  prof_bt_frame_t bt_fr[PROF_DEPTH_MAX + 1]; /* dwarf: the walk's scratch */
  prof_walk_word_t bt_word[PROF_SFX_WORDS];
  /* of walks[], handed out in order; on a page boundary (a tdata is
   * page-aligned), so that the first five fit in one page, not two */
  _Alignas(PAGE) prof_walk_rec_t walk_word[PROF_WALKS];
} prof_tdata_t;
#define PROF_TDATA_ZERO offsetof(prof_tdata_t, sfx.f)
/* tdata_create zeroes around the walk heads, whose tctx alone it clears */
_Static_assert(offsetof(prof_tdata_t, walk_lru) ==
                   offsetof(prof_tdata_t, walks) + sizeof(prof_walk_t) * PROF_WALKS,
               "the walk heads lie between the two zeroed parts");

extern nlock_t prof_dump_lock, prof_tdatas_lock, prof_gctx_lock;

/* ---- prof_mem.c --------------------------------------------------------- */
enum { PM_GCTX, PM_TCTX, PM_TDATA, PM_TREC, PM_TAB, PM_DUMP, PM_NKINDS };
#define PROF_MEM_SLAB_MAX ((size_t)8 << 10)
/* Zeroed; 64-aligned when size is a multiple of 64 (a sampled tctx's
 * counter lines), else 32-aligned. */
void *prof_mem_alloc(size_t size, unsigned kind);
/* The same, but only [0, zero) is sure to be zeroed (the rest is what a
 * reused block held: a fresh mapping reads as zero, untouched); *reused
 * (if not NULL) says which it was. */
void *prof_mem_alloc_head(size_t size, unsigned kind, size_t zero,
                          bool *reused);
void prof_mem_free(void *p, size_t size, unsigned kind);
size_t prof_mem_mapped(void);
size_t prof_mem_used(unsigned kind);
void prof_mem_prefork(void);
void prof_mem_postfork_parent(void);
bool prof_mem_postfork_child(void); /* true: it was mid-update */

/* ---- prof_math.c -------------------------------------------------------- */
double prof_ln(double x);
double prof_exp(double x);
/* ln(u) for u in [2^-53, 1], to 1e-12: the draw's (prof_math.c). */
double prof_ln_unit(double u);
uint64_t prof_prng_next(uint64_t *state);
int64_t prof_draw_wait(uint64_t *state, unsigned lg);
void prof_unbias_one(size_t size, unsigned lg, uint64_t *uobjs,
                     uint64_t *ubytes);
/* 2^-lg, lg <= PROF_LG_MAX, from its bits: exact, and a multiplication
 * by it is exactly a division by 2^lg. */
static inline double prof_pow2_neg(unsigned lg) {
  uint64_t b = (uint64_t)(1023 - lg) << 52;
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}
/* The unbiased estimates c (objects, in 1/2^PROF_FP units) and s (bytes),
 * rounded, each capped at 2^50 (no overflow in sums). */
static NALLOC_ALWAYS_INLINE void prof_unbias_round(double c, double s, uint64_t *uobjs,
                                                   uint64_t *ubytes) {
  const double cap = 1125899906842624.0;
  *uobjs = (uint64_t)(int64_t)(c > cap ? cap : c + 0.5);
  *ubytes = (uint64_t)(int64_t)(s > cap ? cap : s + 0.5);
}
/* prof_unbias_one of `size` > 0 at rate lg > 0 when t = size / 2^lg <=
 * 1/4: 1/(1-e^-t) = b/t with b = t/(1-e^-t), whose series in t is written
 * out with constant coefficients (Bernoulli numbers). */
static NALLOC_ALWAYS_INLINE void prof_unbias_series(size_t size, unsigned lg, double t,
                                                    uint64_t *uobjs, uint64_t *ubytes) {
  double R = (double)((int64_t)1 << lg), t2 = t * t;
  double b = 1 + 0.5 * t +
             t2 * (1.0 / 12 - t2 * (1.0 / 720 - t2 * (1.0 / 30240 - t2 * (
             1.0 / 1209600 - t2 * (1.0 / 47900160)))));
  double s = R * b;
  prof_unbias_round((double)((uint64_t)1 << PROF_FP) * s / (double)(int64_t)size, s,
                    uobjs, ubytes);
}
/* A sampled tctx (lg 1..PROF_LG_TERMS) does not add up the estimates of
 * its objects (prof_unbias_one) but two sums they are a linear function
 * of, which prof_cnt_unbias turns into the estimates when the counts are
 * read (prof_tctx_read: dumps, the peak copy, a reclaimed tctx's `ret`).
 * For an object of s bytes at R = 2^lg, t = s/R <= 1/4:
 *   2^PROF_FP / P = 2^PROF_FP (1/t + 1/2 + t/12 - t^3/720 + ...)
 *   s / P         = R (1 + t/2 + t^2/12 - t^4/720 + ...)
 * so C_UOBJS adds 2^PROF_FP / t and C_UBYTES adds s t (each rounded), and
 * the estimates are C_UOBJS + n 2^PROF_FP (1/2 + B/(12 n R)) and n R + B/2
 * + C_UBYTES/12 from the objects n and bytes B of the same set; the terms
 * in t^3 and t^4 are left out (at t = 1/4, 0.02 of an object's 2^PROF_FP
 * and 6e-6 of its bytes; at bench-random's largest samples, t = 1/8, 2^-4
 * of those). An object outside (t > 1/4, size 0) adds its exact estimate
 * rewritten in the same terms (prof_unbias_terms_one), and a tctx of lg >
 * PROF_LG_TERMS (R from 2^40: 2^PROF_FP / t would reach prof_unbias_one's
 * cap, 2^50) adds the estimates themselves. A sampled malloc and its free
 * each did the series of prof_unbias_series (~55 instructions a use on
 * bench-random, with a division); these are a division and a
 * multiplication. */
#define PROF_LG_TERMS 39
/* An object's two terms, returned in registers (through pointers, the
 * sampled malloc kept them in memory: ~8 instructions). */
typedef struct {
  uint64_t uobjs, ubytes; /* C_UOBJS's and C_UBYTES's */
} prof_terms_t;
prof_terms_t prof_unbias_terms_one(size_t size, unsigned lg);
static NALLOC_ALWAYS_INLINE prof_terms_t prof_unbias_terms(size_t size, unsigned lg) {
  double t = (double)(int64_t)size * prof_pow2_neg(lg);
  if (likely(size != 0 && t <= 0.25 && lg <= PROF_LG_TERMS))
    return (prof_terms_t){
        (uint64_t)(int64_t)((double)((uint64_t)1 << PROF_FP) / t + 0.5),
        (uint64_t)(int64_t)((double)(int64_t)size * t + 0.5)};
  return prof_unbias_terms_one(size, lg);
}
/* The unbiased bytes of one object of `size` bytes whose C_UBYTES term is
 * a2 (prof_unbias_terms): the peak and gdump totals move by it, the same
 * at its malloc and its free. */
static NALLOC_ALWAYS_INLINE int64_t prof_terms_ubytes(size_t size, unsigned lg, uint64_t a2) {
  if (lg > PROF_LG_TERMS) return (int64_t)a2;
  return (int64_t)((double)((int64_t)1 << lg) + 0.5 * (double)(int64_t)size +
                   (double)(int64_t)a2 * (1.0 / 12) + 0.5);
}
/* c (counts of a sampled tctx of rate lg, read as alloc - freed, so that
 * C_UOBJS and C_UBYTES are terms, maybe below 0 as int64_t) to the
 * unbiased estimates, each at least 0. */
void prof_cnt_unbias(prof_cnt_t *c, unsigned lg);
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

/* The highest i < n whose stack word changed (base + off[i] no longer
 * holds val[i]), or -1. Four words a step, or-ing their differences: a
 * walk of CPython's test suite checks ~70 words, nearly always unchanged.
 * With (address, value) pairs, indexing by i - 1 .. i - 4 cost ~8
 * instructions a word (test_json: 1.85G of its 9.5G) and a pointer ~5;
 * with the two arrays one index serves both. */
static NALLOC_ALWAYS_INLINE NALLOC_NO_ASAN uintptr_t
prof_word_at(uintptr_t base, const int32_t *off) {
  return *(const uintptr_t *)(base + (uintptr_t)(intptr_t)*off);
}
static NALLOC_ALWAYS_INLINE NALLOC_NO_ASAN int
prof_words_changed(const uintptr_t *val, const int32_t *off, uintptr_t base,
                   unsigned n) {
  size_t i = n, stop = n & 3; /* one index for both arrays */
  while (i != stop) {
    uintptr_t d = (prof_word_at(base, &off[i - 1]) ^ val[i - 1]) |
                  (prof_word_at(base, &off[i - 2]) ^ val[i - 2]) |
                  (prof_word_at(base, &off[i - 3]) ^ val[i - 3]) |
                  (prof_word_at(base, &off[i - 4]) ^ val[i - 4]);
    if (unlikely(d != 0)) break;
    i -= 4;
  }
  while (i > 0) {
    i--;
    if (prof_word_at(base, &off[i]) != val[i]) return (int)i;
  }
  return -1;
}

/* Whether any of a walk record's n words changed, n a multiple of four
 * (bt_dwarf pads the record): the loop of prof_words_changed without its
 * remainder, and a yes or no instead of the index. */
static NALLOC_ALWAYS_INLINE NALLOC_NO_ASAN bool
prof_words_changed4(const uintptr_t *val, const int32_t *off, uintptr_t base,
                    unsigned n) {
  nalloc_assert((n & 3) == 0);
  for (size_t i = n; i != 0; i -= 4) {
    uintptr_t d = (prof_word_at(base, &off[i - 1]) ^ val[i - 1]) |
                  (prof_word_at(base, &off[i - 2]) ^ val[i - 2]) |
                  (prof_word_at(base, &off[i - 3]) ^ val[i - 3]) |
                  (prof_word_at(base, &off[i - 4]) ^ val[i - 4]);
    if (unlikely(d != 0)) return true;
  }
  return false;
}

/* The same call site at the same depth, the same rbp, and the same words
 * on the stack: the same walk, without taking a step. The words are kept
 * outermost first (as the suffix cache holds them) and read innermost
 * first: a stack that changed mostly changed near the leaf. A deep walk's
 * outer words are the suffix cache's, while its frame there is unchanged
 * (prof_walk_t.sfx_c). */
static NALLOC_ALWAYS_INLINE NALLOC_NO_ASAN bool
prof_walk_same(const prof_sfx_t *s, const prof_walk_t *w, const void *caller,
               uintptr_t sp, uintptr_t bp) {
  if (w->pc != (uintptr_t)caller || w->sp != sp || (w->bp_in && w->bp != bp)) return false;
  unsigned c = w->sfx_c;
  if (c != PROF_WALK_NOSFX && (c >= s->n || s->ver[c] != w->sfx_ver))
    return false;
  if (prof_words_changed4(w->word->val, w->word->off, sp, w->nwords)) return false;
  return c == PROF_WALK_NOSFX ||
         prof_words_changed(s->val, s->off, s->hi, s->f[c].wend) < 0;
}

/* A recorded walk of this stack, or NULL and in *victim the slot to
 * record its walk in. Walks are kept by (call site, depth) in sets of
 * two, the one used less recently replaced first: a program that
 * alternates between two call sites (or one site reached from two
 * stacks) whose keys share a set replays both (with one slot per key,
 * CPython's exact profile walked 280,000 of 383,000 stacks, 206,000 of
 * them for a collision). */
static NALLOC_ALWAYS_INLINE NALLOC_NO_ASAN prof_tctx_t *
prof_walk_find(prof_tdata_t *td, const void *caller, uintptr_t sp, uintptr_t bp,
               prof_walk_t **victim) {
  uint64_t h = ((uint64_t)(uintptr_t)caller ^ ((uint64_t)sp << 7)) * 0x9e3779b97f4a7c15ull;
  unsigned set = (unsigned)(h >> (64 - PROF_WALK_SETS_LG));
  prof_walk_t *w = &td->walks[2 * set];
  for (unsigned k = 0; k < 2; k++)
    if (w[k].tctx != NULL && prof_walk_same(&td->sfx, &w[k], caller, sp, bp)) {
      td->walk_lru[set] = (uint8_t)(k ^ 1);
      return w[k].tctx;
    }
  *victim = &w[td->walk_lru[set]];
  td->walk_lru[set] ^= 1;
  return NULL;
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
    prof_walk_t *w;
    prof_tctx_t *t = prof_walk_find(td, caller, sp, bp, &w);
    return t != NULL ? t : prof_bt_walk_new(td, caller, sp, bp, w);
  }
  return prof_bt_tctx_slow(td, caller, frame);
}
void prof_bt_prime(void);
void prof_bt_prefork(void);
void prof_bt_postfork_parent(void);
bool prof_bt_postfork_child(void); /* true: it was mid-update */

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
bool prof_cfi_postfork_child(void); /* true: it was mid-update */

/* ---- prof_data.c -------------------------------------------------------- */
prof_tdata_t *prof_tdata_get(tsd_t *tsd, bool create);
/* The tctx of (pcs, td->want_bkt, td->node), made if new (NULL: out of
 * memory). */
prof_tctx_t *prof_tctx_lookup(prof_tdata_t *td, void **pcs, unsigned n);
/* The same, with the stack's hash (prof_bt_hash_fin) already known. */
prof_tctx_t *prof_tctx_lookup_hashed(prof_tdata_t *td, void **pcs, unsigned n,
                                     uint64_t hs);
/* The tctx of the same stack as `any`, in size bucket bkt (and the
 * thread's node). */
prof_tctx_t *prof_tctx_bucket(prof_tdata_t *td, prof_tctx_t *any,
                              unsigned bkt);
/* The owner's table (td->tab) is keyed by (stack, bucket, node); bucket 0
 * (exact mode) on node 0 leaves the stack's hash as it is. */
static inline uint64_t prof_key_mix(unsigned bkt, unsigned node) {
  return (uint64_t)bkt * 0xd6e8feb86659fd93ull ^
         (uint64_t)node * 0x9fb21c651e98df25ull;
}
/* Each entry keeps the top bits of its tctx's hash above the pointer
 * (prof_mem's records are user addresses of ADDR_BITS bits), so that a
 * probe reads a tctx only when those agree: at 3/4 full a probe passes
 * ~2.5 entries, and without the tag each one was a tctx's line to read.
 * Filled to 1/2 untagged, the table was 1 MiB of CPython's tests' 16 MB
 * of records (48k stacks, capacity 128k). */
#define PROF_TAB_PTR (((uintptr_t)1 << ADDR_BITS) - 1)
static inline uintptr_t prof_tab_tag(uint64_t h) {
  return (uintptr_t)(h >> ADDR_BITS) << ADDR_BITS;
}
static inline prof_tctx_t *prof_tab_tctx(uintptr_t e) {
  return (prof_tctx_t *)(e & PROF_TAB_PTR);
}
/* prof_tctx_bucket's first probe: the tctx of `any`'s stack in bucket
 * bkt if the probe finds it, else NULL (prof_sample's inline case). */
static NALLOC_ALWAYS_INLINE prof_tctx_t *prof_tctx_bucket_probe(prof_tdata_t *td,
                                                               prof_tctx_t *any,
                                                               unsigned bkt) {
  prof_gctx_t *g = any->gctx;
  uint64_t h = g->hash ^ prof_key_mix(bkt, td->node);
  if (likely(td->tab != NULL)) {
    uintptr_t e = td->tab[h & (td->tab_cap - 1)];
    if (e != 0 && (e & ~PROF_TAB_PTR) == prof_tab_tag(h)) {
      prof_tctx_t *t = prof_tab_tctx(e);
      if (t->gctx == g && t->bkt == bkt && t->node == td->node) return t;
    }
  }
  return NULL;
}
/* prof_tctx_bucket with its first probe inline: sampled mode looks up
 * the size bucket's tctx at most samples (bench-random: 94%), and the
 * call cost ~15 instructions of its ~49. */
static NALLOC_ALWAYS_INLINE prof_tctx_t *prof_tctx_bucket_fast(prof_tdata_t *td,
                                                              prof_tctx_t *any,
                                                              unsigned bkt) {
  prof_tctx_t *t = prof_tctx_bucket_probe(td, any, bkt);
  return t != NULL ? t : prof_tctx_bucket(td, any, bkt);
}
void prof_tdata_detach(tsd_t *tsd);
/* The thread moved to an arena of node `node` (thread.arena): its tctxs
 * from now on count that node, so the owner-private caches that answer
 * with a tctx (walks, `last`) forget the old ones. */
void prof_tdata_moved(prof_tdata_t *td, unsigned node);
/* Owner: reclaim the tctxs that a dump found idle (PROF_ATTN_SWEEP). */
void prof_tdata_sweep(prof_tdata_t *td);
/* A remote free made a dead thread's tctx empty: maybe sweep (trylock). */
void prof_dead_zeroed(void);
/* With prof_tdatas_lock: free the dead threads' empty tctxs and records. */
void prof_dead_sweep_locked(void);
/* With prof_tdatas_lock and prof_gctx_lock (a dump, after writing): free
 * the gctxs nothing points to whose counts have been written. */
void prof_gctx_reap_locked(void);
/* cur: live counts; acc (optional): allocated ever. */
void prof_tctx_read(prof_tctx_t *t, prof_cnt_t *cur, prof_cnt_t *acc);
/* g's side record, made if it has none (NULL: out of memory); any thread.
 * Inline: every sampled free reads it for the lifetime (a call and its
 * frame cost ~13 instructions a sample on bench-random). */
prof_gext_t *prof_gctx_ext_new(prof_gctx_t *g);
static inline prof_gext_t *prof_gctx_ext(prof_gctx_t *g) {
  prof_gext_t *x = atomic_load_explicit(&g->ext, memory_order_acquire);
  if (likely(x != NULL)) return x;
  return prof_gctx_ext_new(g);
}
/* A sampled object of t lived `ns` nanoseconds (any thread; the first
 * one of a stack makes its histogram). Inline, as prof_gctx_ext: the
 * sampled free's only other call. */
static inline void prof_life_add(prof_tctx_t *t, uint64_t ns) {
  /* t->gctx is alive: t counts the object being freed */
  prof_gext_t *x = prof_gctx_ext(t->gctx);
  if (x == NULL) return; /* not counted */
  atomic_fetch_add_explicit(&x->life.n[prof_life_bkt(ns)], 1, memory_order_relaxed);
}
void prof_reset(unsigned lg);
extern prof_trec_t *prof_tdatas; /* live threads (prof_tdatas_lock) */
extern prof_trec_t *prof_dead;   /* standalone records of exited threads */
extern prof_trec_t prof_orphans; /* exited threads' tctxs, once dumped */
extern _Atomic unsigned prof_reset_gen;
/* A dump has shown the dead record r: its tctxs go to prof_orphans and r
 * is freed (prof_tdatas_lock). */
void prof_dead_orphan_locked(prof_trec_t *r);
extern _Atomic(prof_gctx_t *) prof_gctx_all;
extern _Atomic size_t prof_ntctx_total, prof_ngctx_total, prof_ntdata_total,
    prof_nret_total;
void prof_data_postfork_child(tsd_t *tsd);

/* ---- prof_peak.c -------------------------------------------------------- */
extern _Atomic uint64_t prof_pk_epoch;
#define PROF_PK_BUSY UINT64_MAX
void prof_peak_boot(void);
void prof_peak_copy(prof_tctx_t *t);
/* Before a tctx's counts change: keep its live counts of the peak. */
static NALLOC_ALWAYS_INLINE void prof_peak_cow(prof_tctx_t *t) {
  if (unlikely(atomic_load_explicit(prof_tctx_pk_epoch(t), memory_order_relaxed) !=
               atomic_load_explicit(&prof_pk_epoch, memory_order_relaxed)))
    prof_peak_copy(t);
}
void prof_peak_rise(prof_tdata_t *td);            /* td->pk_d > td->pk_hi */
void prof_peak_fall(prof_tdata_t *td, int64_t s); /* td->pk_d < td->pk_lo */
/* A free of `bytes` by a thread without a tdata. */
void prof_peak_sub_global(int64_t bytes);
void prof_peak_detach(prof_tdata_t *td);
void prof_peak_reset(void);
/* For a dump of the peak: read once, then prof_peak_read per tctx. */
typedef struct {
  bool now;       /* the current state is the peak */
  uint64_t epoch;
} prof_peak_view_t;
prof_peak_view_t prof_peak_view(void);
void prof_peak_read(const prof_peak_view_t *v, prof_tctx_t *t,
                    prof_cnt_t *cur);
bool prof_peak_held(prof_tctx_t *t); /* the peak copy needs t */
int64_t prof_peak_bytes(void);       /* live bytes at the peak (estimate) */

/* ---- prof_dump.c -------------------------------------------------------- */
enum { PROF_DUMP_NOW = 0, PROF_DUMP_PEAK = 1, PROF_DUMP_LEAK = 2 };
/* Writes a profile to `path`: 0 or an errno value (the open/write error).
 * `flags`: PROF_DUMP_PEAK writes the peak profile; PROF_DUMP_LEAK first
 * prints the leak summary. `excl`: the name was made up by us (O_EXCL). */
int prof_dump_file(const char *path, unsigned flags, bool excl);
/* The same profile (gperftools format) to an open descriptor, left open:
 * 0 or an errno value. For the HTTP server (prof_http.c). */
int prof_dump_fd(int fd);
/* Decimal/hex formatting without stdio. Return the length written. */
size_t prof_fmt_u64(char *buf, uint64_t v);
size_t prof_fmt_hex(char *buf, uint64_t v);

/* ---- prof_leak.c -------------------------------------------------------- */
/* What is still live at exit, from the final dump's snapshot: totals and
 * the biggest stacks (their first frames copied: the gctxs may be gone by
 * the time the report is printed). */
#define PROF_LEAK_TOP 5
#define PROF_LEAK_FRAMES 8 /* copied with prof_gctx_pc */
typedef struct {
  uint64_t objs, bytes, stacks;
  unsigned lg;
  struct {
    uint64_t objs, bytes;
    unsigned nframes;
    void *pcs[PROF_LEAK_FRAMES];
  } top[PROF_LEAK_TOP];
  unsigned ntop;
} prof_leak_t;
/* Prints the leak report; `path`: the final dump (NULL: none written). */
void prof_leak_report(const prof_leak_t *l, const char *path);
void prof_leak_boot(void);

/* ---- prof_trigger.c ----------------------------------------------------- */
int prof_dump_request(const char *path); /* prof.dump ctl */
int prof_dump_peak_request(const char *path); /* prof.dump_peak ctl */
void prof_triggers_boot_late(void);
void prof_interval_account(tsd_t *tsd, prof_tdata_t *td, uint64_t bytes);
void prof_gdump_account(tsd_t *tsd, int64_t delta);
void prof_triggers_run_pending(tsd_t *tsd);
void prof_triggers_postfork_child(void);

#endif
