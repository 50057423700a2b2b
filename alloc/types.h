/* types.h -- the allocator's data types in one place, and the layout
 * constants that tie them together (checked by _Static_assert below).
 *
 * The parts and what each owns are described in alloc/README.md. In short:
 *   span   a run of pages: a free run of the page heap, a small span cut
 *          into equal slots of one size class, or one large block;
 *   heap   a thread's own set of small spans, one list set per size class;
 *          only the owning thread allocates from them or frees into them
 *          without atomics; other threads' frees set bits in a span's
 *          remote bitmap;
 *   arena  a page heap (free runs, decay), the spans whose owning thread
 *          exited (abandoned, adopted by the next thread that needs one),
 *          and a shared heap behind a lock for threads without a heap of
 *          their own; arenas are grouped by NUMA node. */
#ifndef NALLOC_TYPES_H
#define NALLOC_TYPES_H

#include <pthread.h>
#include <sys/types.h>

#include "compiler.h"

/* ---- memory layout ------------------------------------------------------ */
#define LG_PAGE 12
#define PAGE ((size_t)1 << LG_PAGE)
#define CACHELINE 64
#define ADDR_BITS 47 /* user addresses on x86-64 Linux */

/* ---- size classes (size_class.c, sc_compute.c) ----------------------------
 * 16-byte steps to 128 B, then eight classes per doubling to SC_SMALL_MAX
 * (2^lg/8 apart: rounding waste at most 12.5% of the request above 128 B),
 * and for 2^lg from 512 B to 4 KiB the first of the doubling's eight steps
 * split in SC_HDR_SPLIT (2^lg/32 apart): a request of a power of two plus
 * a small header, as databases and caches make (a 4,096-byte page and its
 * 272-byte header, a 1,024-byte buffer and 8 bytes), rounds up by less
 * than 1/32 of the power of two instead of 1/8. Not above 4 KiB: there a
 * span holds few slots, and each class a thread touches costs a partly
 * used span of 8 pages or more (splits up to 32 KiB raised bench-random's
 * peak by 3.4%). Every class a multiple of 16. */
#define SC_LG_MAX 16      /* SC_SMALL_MAX = 2^16 */
#define SC_HDR_LG_MIN 9   /* first doubling whose first step is split (512) */
#define SC_HDR_LG_END 13  /* first that is not (8 KiB) */
#define SC_HDR_SPLIT 4
#define SC_NSMALL \
  (8 + 8 * (SC_LG_MAX - 7) + (SC_HDR_SPLIT - 1) * (SC_HDR_LG_END - SC_HDR_LG_MIN))
#define SC_SMALL_MAX ((size_t)1 << SC_LG_MAX)
#define SC_DIV_SHIFT 40              /* slot index = (off * div_mul) >> 40 */

typedef struct sc_info_s {
  uint32_t size;       /* slot size in bytes */
  uint16_t npages[3];  /* pages of a thread's first span of this class, of
                          the later ones, and of those after SC_BUSY_SPANS
                          (sc_npages) */
  uint64_t div_mul;    /* ceil(2^SC_DIV_SHIFT / size) */
} sc_info_t;

/* ---- spans ----------------------------------------------------------------- */
#define SPAN_MAX_SLOTS 1024
#define SPAN_MAX_WORDS (SPAN_MAX_SLOTS / 64)
/* Slot indices by multiplication are exact for offsets below this (see
 * sc_slot_of): small spans are never longer. */
#define SPAN_MAX_BYTES ((size_t)1 << 20)

/* SPAN_KEPT: a sampled block's page run, freed and kept in a thread heap's
 * cache for the next sample (sample_run.c): not a block any more. */
enum { SPAN_NONE = 0, SPAN_FREE = 1, SPAN_SMALL = 2, SPAN_LARGE = 3, SPAN_KEPT = 4 };

/* Which of its owner's lists a small span is on (owner-private). */
/* SL_PARKED: abandoned, and empty when its heap gave it back (arena.c). */
enum { SL_NONE, SL_CUR, SL_AVAIL, SL_FULL, SL_EMPTY, SL_ABANDONED, SL_PARKED };

/* A full span's wish to hear of remote frees (span.c, the notify
 * protocol): NONE the owner looks at the span by itself; WANT the span is
 * full and off its owner's lists, the next remote free announces it on the
 * owner's queue; PUSHING a remote free is doing that now; QUEUED it is on
 * the queue until the owner drains it; ORPHAN no owner. */
enum { SN_NONE = 0, SN_WANT = 1, SN_PUSHING = 2, SN_QUEUED = 3, SN_ORPHAN = 4 };

/* A small span's record of one sampled slot, in 8 bytes: the requested
 * size charged (at most SC_SMALL_MAX: 17 bits) above the profiler's tctx
 * pointer (user addresses have ADDR_BITS bits). 0: not sampled. */
typedef uint64_t sample_slot_t;
#define SAMPLE_SIZE_SHIFT ADDR_BITS

struct heap_s;
typedef struct span_s {
  /* Line 0: what free's fast path and malloc's pop read. */
  uintptr_t start;
  uint64_t div_mul;    /* SPAN_SMALL; 0 otherwise, so slot checks fail */
  uint32_t slot_size;  /* SPAN_SMALL; 0 otherwise */
  uint8_t kind;        /* SPAN_* */
  uint8_t cls;         /* SPAN_SMALL: size class */
  uint16_t arena;      /* index of the arena whose pages these are */
  /* The owning heap while its frees may push with no further look: a
   * small span that is on its owner's lists and holds no live sampled
   * slot (span_unsampled). The same heap tagged (span_fast_tag: bit 0)
   * while such a span of sampled mode (prof_births) holds one: its owner's
   * frees of the other slots push after one look at the slot's record
   * (free_slot_slow). The same heap tagged with bit 1 (span_full_tag)
   * while such a span without a live sample is on its owner's full list;
   * with both bits (span_full_live_tag) while a span of sampled mode that
   * holds one is.
   * NULL otherwise (and for every other kind of span). */
  _Atomic(struct heap_s *) owner_fast;
  /* Owner-only counters, plain so that each update is one instruction;
   * statistics read them racily (arena_stats). */
  uint16_t nslots;         /* SPAN_SMALL */
  uint8_t nwords;          /* SPAN_SMALL: at most SPAN_MAX_WORDS */
  _Atomic uint8_t notify;  /* SN_* */
  /* A remote free has come since the span was made (span_push_remote
   * sets it after its bit; never cleared while the span lives). While it
   * is 0 the owner's free checks a slot against the free bitmap alone, so
   * a thread that frees only its own blocks never reads the remote
   * bitmap's line (larson -t 1: 0.49 of free's 1.57 L1 misses a free). */
  _Atomic uint8_t rpending;
  /* Read by every free that misses the owner's fast path (another
   * thread's block: free_slot_slow, free_slot_plain), and written only
   * when the span changes owner or takes its first sample: on this line,
   * not on the next two, which the owner writes as the span moves
   * between its lists (next, prev, list) and remote frees announce it
   * (rnext). Issue 11: a remote free read five lines of the record
   * (this one, owner's, prof's and the two bitmap words'), now three. */
  _Atomic(struct heap_s *) owner; /* SPAN_SMALL: NULL while abandoned */
  /* Profiling. SPAN_SMALL: sample_slot_t[nslots], NULL while nothing in
   * the span was sampled. SPAN_LARGE: the block's tctx and size. */
  _Atomic(sample_slot_t *) prof;
  size_t npages;

  /* Line 1 on: the rest. */
  uintptr_t chunk_lo, chunk_hi; /* the OS mapping the span lies in: runs
                                   are merged only inside it */
  struct span_s *next, *prev;   /* the one list the span is on: its owner's
                                   (SL_*), the arena's abandoned list, or
                                   the page heap's run list */
  struct span_s *anext, *aprev; /* SPAN_SMALL: the arena's list of all its
                                   small spans (statistics) */
  struct span_s *rnext;         /* link on the owner's remote queue */
  union {
    uint64_t dirty_since;       /* SPAN_FREE: when it became dirty */
    struct {                    /* SPAN_SMALL, for its heap's idle sweeps: */
      uint32_t gc_nmalloc;      /* nmalloc (low bits) at the last sweep
                                   that found it current (heap_gc) */
      uint16_t gc_sweep;        /* the heap's nsweeps in the sweep
                                   interval of its last malloc (set as it
                                   runs dry: heap_cur_done) */
    };
  };
  union {
    size_t usize;               /* SPAN_LARGE: usable bytes */
    size_t nres;                /* SPAN_FREE, dirty: pages that may be
                                   resident (counted in the arena's dirty or
                                   muzzy total); the rest of the run was
                                   clean when it joined */
  };
  uint8_t dirty;                /* SPAN_FREE: pages may still be resident */
  uint8_t zeroed;               /* the pages read as zero */
  uint8_t muzzy;                /* SPAN_FREE, dirty: given back with
                                   MADV_FREE (page_heap.c: the stages) */
  _Atomic uint8_t prof_births;  /* SPAN_SMALL: `prof` holds a birth time per
                                   slot after its records (sample.c; a
                                   record with bit 0 set has one) */
  uint8_t sample_run;           /* SPAN_LARGE, SPAN_KEPT: the page run of a
                                   sampled small block (sample_run.c) */
  uint8_t list;                 /* SPAN_SMALL: SL_*, owner-private */
  _Atomic uint16_t prof_live;   /* SPAN_SMALL with prof_births: records that
                                   may be live (raised before a record is
                                   written, lowered after it is cleared):
                                   at 0 the owner's frees are fast again */
  /* SPAN_LARGE: the block's tctx and size (`prof`: on the first line) */
  void *large_tctx;
  size_t large_size;
  union {
    uint64_t large_birth; /* os_stamp() at the sample; 0: not kept */
    struct {              /* SPAN_SMALL */
      uint16_t nholes;     /* free pages purged while the span sat idle
                              (span_purge_holes), not yet counted back by
                              its next turn as its heap's current span */
      uint16_t holes_used; /* `used` at the last look for holes; 0 before
                              any. A current span's tail holes: the first
                              slot purged (span_purge_tail) */
      uint32_t holes_reach; /* current span with holes (span_purge_tail):
                               the nmalloc at which a malloc may first
                               reach them */
    };
  };
  /* SPAN_SMALL: the free bitmap, bits[0..nwords) (1 = slot free, written
   * by the owner only), and the remote bitmap, bits[SPAN_RBITS..) (slots
   * freed by other threads, set with fetch_or, collected by the owner),
   * at a fixed offset so free finds it with one load. Records of other
   * kinds have no bitmaps. */
  /* The word of `bits` where pop looks first: a pointer, not an index,
   * so that malloc's fast path reads it with one load and no address
   * arithmetic (one instruction a malloc). */
  _Alignas(CACHELINE) _Atomic uint64_t *cursor;
  uintptr_t wbase;         /* address of the cursor word's first slot */
  uint64_t nmalloc;        /* slots handed out since the span was made */
  uint16_t used;           /* slots allocated; remote frees not yet
                              collected still count (at most nslots + 1:
                              the current span's phantom) */
  uint32_t pop_size;       /* slot_size again, on the line malloc's pop
                              reads (span_take) */
  _Atomic uint64_t bits[];
} span_t;
#define SPAN_RBITS (SPAN_MAX_WORDS + 4)

/* owner_fast of a span of owner h with live samples in sampled mode. */
static inline struct heap_s *span_fast_tag(struct heap_s *h) {
  return (struct heap_s *)((uintptr_t)h | 1);
}
/* owner_fast of a span on the full list of thread heap h, with no live
 * sample: the owner's free takes it straight back to the available list
 * (free_slot_slow). A sample recorded in it meanwhile (realloc) makes it
 * span_full_live_tag(h). */
static inline struct heap_s *span_full_tag(struct heap_s *h) {
  return (struct heap_s *)((uintptr_t)h | 2);
}
/* owner_fast of a span of sampled mode (prof_births) on the full list of
 * thread heap h that may hold a live sample: the owner's free looks at
 * the slot's record and takes the span back to the available list as
 * for span_full_tag (free_full_sampled), not through heap_free_owned. */
static inline struct heap_s *span_full_live_tag(struct heap_s *h) {
  return (struct heap_s *)((uintptr_t)h | 3);
}

/* ---- heaps (heap.c) ---------------------------------------------------- */
/* A thread heap keeps freed page runs of sampled small blocks of up to
 * SAMPLE_RUN_PAGES pages, one of each length, SAMPLE_RUN_KEEP pages in all
 * (sample_run.c). */
#define SAMPLE_RUN_PAGES (SC_SMALL_MAX / PAGE)
#define SAMPLE_RUN_KEEP 64
/* A heap's doubly linked list of spans (through span.next/prev). */
typedef struct span_list_s {
  span_t *head, *tail;
} span_list_t;

typedef struct heap_bin_s {
  /* spans with free slots, other than the current one, oldest first: a
   * span that got its first free slot back joins at the tail, so it has
   * the longest time to gather more before the heap turns to it */
  span_list_t avail;
  span_list_t full;  /* spans with none, waiting to hear of remote frees */
  span_list_t empty; /* spans with every slot free, kept for reuse */
  uint32_t nspans; /* spans of the class this heap holds (sizing the next:
                      sc_npages) */
  uint8_t nempty;  /* spans on `empty` (at most HEAP_EMPTY_KEEP) */
  uint8_t holes_after;  /* idle sweeps before the available spans' free
                           pages are purged (heap_gc_holes): doubled each
                           time such a span comes back into use (0: 1) */
  uint16_t idle_sweeps; /* idle sweeps in a row in which the class
                           handed out no slot */
  uint32_t look_nmalloc; /* the current span's nmalloc (low bits) at the
                            last look for holes between sweeps */
  uint8_t tail_wait;     /* sweeps before the current span's free tail may
                            be purged again (its holes came back) */
  uint8_t tail_passes;   /* times the current span's tail holes may have
                            been reached, and were not (gc_tail) */
  uint8_t tail_sweeps;   /* sweeps into the current window (gc_tail)... */
  uint16_t tail_peak;    /* ...the most slots the class's current span had
                            in use at them... */
  uint16_t tail_prev;    /* ...and at the previous window's */
} heap_bin_t;

typedef struct heap_s {
  /* The span each class allocates from; a never-empty sentinel with no
   * free slot when there is none, so that pop needs no NULL check. */
  span_t *cur[SC_NSMALL];
  struct arena_s *arena;
  /* Shared heaps only: held around every use. Every remote free reads it
   * (free_slot_plain): kept off rqueue's line, which remote frees
   * announcing a span and the owner's drain write. */
  struct nlock_s *lock;
  struct heap_s *next_all;     /* registry of every heap ever made */
  struct heap_s *next_free;    /* registry's list of reusable heaps */
  _Atomic(span_t *) rqueue;    /* full spans announced by remote frees */
  /* Slow paths of the owner in progress (heap_enter: a signal handler's
   * may nest). The decay thread's look at an idle heap (heap_idle_sweep)
   * and the owner's slow paths exclude each other through these two:
   * each side sets its own, then reads the other's. A fork child drops a
   * busy heap. */
  _Atomic uint8_t busy;
  _Atomic uint8_t sweeping;    /* the decay thread looks at the heap */
  uint8_t live;                /* owned by a thread (or an arena) */
  uint16_t srun_pages;         /* pages in sruns */
  uint16_t nsweeps;            /* idle sweeps made (heap_gc), modulo 2^16:
                                  compared for equality only */
  uint32_t gc_countdown;       /* slow paths until the next idle sweep */
  uint32_t holes_countdown;    /* new spans until the next look for holes
                                  outside the sweeps (heap_gc_holes) */
  _Atomic uint32_t nslow;      /* slow paths entered (heap_enter) */
  uint32_t idle_seen;          /* nslow at the decay thread's last walk, */
  uint32_t look_seen;          /* ...at its last look at the spans, */
  uint32_t look_walks;         /* and walks since that look */
  /* Freed page runs of sampled blocks, by length in pages (sruns[n-1]:
   * n pages), kept for the thread's next samples (sample_run.c). */
  span_t *sruns[SAMPLE_RUN_PAGES];
  /* classes the heap took a span of since it was made (or last gave its
   * spans back): what heap_each walks instead of all SC_NSMALL bins */
  uint64_t touched[(SC_NSMALL + 63) / 64];
  heap_bin_t bins[SC_NSMALL];
} heap_t;

/* ---- locks (lock.c) ---------------------------------------------------
 * A futex lock whose word is the owner's thread id (plus a "waiters"
 * bit), set by the same compare-and-swap that takes the lock, so the fork
 * handlers can tell a lock the forking thread itself holds. `rank` orders
 * locks: a thread takes them in increasing rank (checked in the debug
 * build); the ranks are listed in lock.h. */
typedef struct nlock_s {
  _Atomic uint32_t word; /* 0: free; else owner id | NLOCK_WAITERS */
  uint8_t rank;
  bool fork_taken;       /* taken by a fork's prepare handler (nlock_prefork;
                            written by the holder only) */
} nlock_t;

/* ---- arenas (arena.c, page_heap.c) ------------------------------------- */
#define ARENAS_MAX 1024
#define HEAP_NBINS 160

typedef struct arena_s {
  unsigned index, node;
  _Atomic unsigned nthreads;
  bool broken;             /* fork child: a lock was held mid-update */
  /* page heap (page_heap.c), under heap_lock */
  nlock_t heap_lock;
  span_t *runs[HEAP_NBINS];  /* free runs by size; dirty at the head */
  uint64_t runs_nonempty[(HEAP_NBINS + 63) / 64];
  span_t *rec_cache;         /* recycled run / large records */
  span_t *small_recs;        /* recycled small span records (span.c) */
  size_t npages_active;      /* pages in small and large spans */
  size_t npages_dirty;       /* free pages that may be resident, not
                                yet given back (stage dirty) */
  size_t npages_muzzy;       /* free pages given back with MADV_FREE:
                                resident until the kernel reclaims them */
  size_t mapped;             /* bytes mapped for this arena */
  size_t large_allocated;    /* usable bytes of live large spans */
  uint64_t nmalloc_large, ndalloc_large;
  uint64_t npurged;          /* pages returned for good (DONTNEED, unmap) */
  uint64_t nmuzzied;         /* pages moved from dirty to muzzy */
  uint64_t npurge_calls;     /* madvise / munmap calls that returned pages */
  /* pages of live small spans purged by their owners (span_purge_holes):
   * not resident, so not active; and the purges, apart from npurged and
   * npurge_calls because owners write them without heap_lock */
  _Atomic size_t npages_holes;
  _Atomic uint64_t nholes_purged, nholes_calls;
  uint64_t nmalloc_small_gone; /* nmalloc of small spans given back */
  uint64_t decay_next_ns;     /* next stage change due (page_heap.c) */
  uint64_t reap_due_ns;       /* parked spans to give back by then
                                 (arena_note_parked; heap_lock) */
  uintptr_t pop_lo, pop_hi;  /* the last run of fresh pages faulted in */
  span_t *small_all;         /* every small span of the arena */
  /* spans whose owner went away, by class (abandon_lock) */
  nlock_t abandon_lock;
  _Atomic(span_t *) abandoned[SC_NSMALL]; /* heads: peeked without the lock */
  uint16_t nparked[SC_NSMALL];  /* SL_PARKED spans among them */
  uint32_t nmoves;              /* spans that joined them or were adopted, */
  uint32_t look_moves;          /* ...at the decay thread's last look */
  _Atomic uint64_t orphan_frees; /* remote frees into abandoned spans */
  nlock_t reap_lock;             /* one reaper at a time (trylock only) */
  /* the heap of threads that have none (shared_lock) */
  nlock_t shared_lock;
  heap_t *shared;
} arena_t;

/* ---- per-thread state (tsd.c) ------------------------------------------ */
enum { TSD_UNINIT = 0, TSD_NOMINAL = 1, TSD_TEARDOWN = 2 };

typedef struct tsd_s {
  heap_t *heap;             /* never NULL: heap_none until the thread has one */
  int64_t prof_countdown;   /* requested bytes left until the next sample */
  /* free's guess of the span of the block it frees (entry_free): the
   * current span of the class malloc last refilled. Used only when it
   * equals the page map's answer, so it may be stale (NULL at first). */
  struct span_s *free_span;
  uint8_t state;            /* TSD_* */
  uint8_t reentrant;        /* >0: inside nalloc internals; never sample */
  uint8_t prof_busy;        /* >0: in the profiler's sampled paths beyond
                               counter updates (its tables may be
                               mid-update: a fork child turns it off) */
  uint16_t arena;           /* index of the arena this thread uses */
  uint32_t tid;             /* lock owner id (tsd.c), 0 until first needed */
  void *prof_tdata;         /* owned by prof/ */
  const void *prof_last;    /* the last block malloc_sampled returned: a
                               free of it is a temporary allocation (prof/) */
  uint32_t lock_ranks;      /* debug build: bit r = a lock of rank r held */
  uint16_t nlocks;          /* nlocks held: more than 0 in a fork's prepare
                               handler means fork() was called from a
                               signal handler that interrupted nalloc */
  uint16_t nlocks_fork;     /* nlocks when the fork handlers began */
  uint32_t tid_fork;        /* tid when the fork handlers began */
} tsd_t;

/* ---- what ties the constants together --------------------------------- */
_Static_assert(SC_SMALL_MAX < ((size_t)1 << (64 - SAMPLE_SIZE_SHIFT)),
               "a sampled slot's size must fit above its tctx pointer");
_Static_assert((uint64_t)63 * SC_SMALL_MAX <= UINT32_MAX,
               "a slot's offset in its cursor word's slots fits 32 bits (span_take)");
_Static_assert(SC_SMALL_MAX * 4 <= SPAN_MAX_BYTES,
               "the largest class must get spans of several slots");
_Static_assert((uint64_t)SPAN_MAX_BYTES * (((uint64_t)1 << SC_DIV_SHIFT) / 16 + 1) <
                   ((uint64_t)1 << 63),
               "slot index by multiplication must not overflow");
_Static_assert(((size_t)1 << SC_DIV_SHIFT) / SPAN_MAX_BYTES >= SC_SMALL_MAX,
               "slot index by multiplication must be exact in a span");
_Static_assert(SC_DIV_SHIFT == 40 && SPAN_MAX_BYTES <= ((size_t)1 << 20) &&
                   ((uint64_t)1 << SC_DIV_SHIFT) / SC_SMALL_MAX >= ((uint64_t)1 << 24) &&
                   SPAN_MAX_SLOTS < 65536,
               "span_slot: a slot start's product has bits 24..39 zero, another "
               "offset's not, and the index fits 16 bits");
_Static_assert(SPAN_MAX_SLOTS % 64 == 0 && SPAN_MAX_WORDS <= 16,
               "bitmap words");
_Static_assert(SC_NSMALL < 256, "a class fits in span_t.cls");
_Static_assert(ARENAS_MAX <= 65536, "an arena index fits in span_t.arena");
_Static_assert(SPAN_MAX_SLOTS + 1 <= UINT16_MAX, "span_t.used fits 16 bits");
_Static_assert(offsetof(span_t, rpending) < CACHELINE &&
                   offsetof(span_t, owner) + sizeof(void *) <= CACHELINE &&
                   offsetof(span_t, prof) + sizeof(void *) <= CACHELINE &&
                   offsetof(span_t, bits) % CACHELINE == 32 &&
                   offsetof(span_t, bits[SPAN_RBITS]) % CACHELINE == 0,
               "span record lines");

#endif
