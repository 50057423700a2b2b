/* arena.h -- arenas (arena_t, in types.h): per NUMA node, the pages
 * (page_heap.h), the spans whose owners went away, and a shared heap for
 * threads without one. Threads touch an arena only for whole spans and
 * large blocks. */
#ifndef NALLOC_ARENA_H
#define NALLOC_ARENA_H

#include "ctl.h"
#include "types.h"

extern _Atomic(arena_t *) arenas[ARENAS_MAX];
extern unsigned arenas_count; /* arenas in use (narenas) */
/* arenas.narenas, arena.<i>.purge. */
extern const ctl_table_t arena_ctl_table;

/* Arena i, created on first use; NULL when out of memory. */
arena_t *arena_get(unsigned i);
/* The arena for a thread being set up (of node_pick_arena's node), its
 * thread counted; NULL when out of memory. */
arena_t *arena_pick(void);
/* a, or in a fork child whose parent was interrupted inside a (a broken
 * arena) another arena, made for the purpose if need be. */
arena_t *arena_usable(arena_t *a);
/* Sizes the arena set (after NALLOC_CONF and NUMA discovery). */
void arena_boot(void);

/* Spans of exited threads: parked by class, adopted by the next heap of
 * the arena that needs a span of that class. */
void arena_abandon(arena_t *a, span_t *s);
/* arena_abandon of a list of spans of a (linked through `next`), under one
 * lock. Empty ones are parked there too, for the next threads (thread
 * churn): the next decay walk, due within dirty_decay_ms / 16, gives them
 * back to the page heap, and dirty_decay_ms:0 gives them back at once. */
void arena_abandon_list(arena_t *a, span_t *s);
span_t *arena_adopt(arena_t *a, unsigned cls, struct heap_s *h);
/* A remote free went into an abandoned span of a: every so often the
 * arena looks for abandoned spans that emptied and gives them back. */
void arena_note_orphan_free(arena_t *a);
/* A block of class cls from the arena's shared heap (threads without a
 * heap of their own); NULL when the OS refuses memory. */
void *arena_shared_alloc(arena_t *a, unsigned cls);

/* Returns free memory to the OS: all of it (all=true) or what is past
 * decay; abandoned spans that emptied are given back first. Returns pages
 * purged. */
size_t arena_purge(arena_t *a, bool all);
/* The decay thread, at each look at idle thread heaps (heap_idle_sweep):
 * when no span joined the arena's abandoned lists or was adopted from
 * them since the last look, nobody is about to fill them, and their free
 * pages go back too (a thread that exits with live blocks leaves its
 * spans there). */
void arena_idle_look(arena_t *a);
/* Decay as time has it (arena_purge(a, false)); returns when the next
 * stage change is due (nalloc_now_ns time; UINT64_MAX: nothing to decay). */
uint64_t arena_decay(arena_t *a);
uint64_t arena_decay_next(arena_t *a);

typedef struct arena_stats_s {
  size_t allocated, active, dirty, muzzy, mapped;
  uint64_t nmalloc, ndalloc;
  uint64_t npurged;      /* pages returned for good (MADV_DONTNEED, unmap) */
  uint64_t nmuzzied;     /* pages made muzzy (MADV_FREE) */
  uint64_t npurge_calls; /* madvise and munmap calls for either */
  unsigned nthreads;
} arena_stats_t;
void arena_stats(arena_t *a, arena_stats_t *out);

void arena_prefork(void);
void arena_postfork_parent(void);
void arena_postfork_child(void);

#define FOR_EACH_ARENA(a)                                                     \
  for (unsigned arena_i_ = 0; arena_i_ < ARENAS_MAX; arena_i_++)              \
    for (arena_t *a = atomic_load_explicit(&arenas[arena_i_], memory_order_acquire); \
         a != NULL; a = NULL)

#endif
