/* heap.h -- a heap: the small spans one thread (or, behind a lock, an
 * arena's shared heap) allocates from, one set of lists per size class.
 *
 * malloc pops the current span of the class (entry.h); when it is dry,
 * heap_alloc_slow finds the next span: one with free slots, one a remote
 * free announced (the remote queue), a kept empty one, an abandoned one
 * of the arena, or new pages. A span the owner frees into while it is on
 * the full list goes back to the available list; an empty one is kept
 * (a few per class) or given back to the arena's page heap. When the
 * thread exits, every span goes back to the arena: empty ones to the page
 * heap, the rest onto the arena's abandoned lists for other threads. */
#ifndef NALLOC_HEAP_H
#define NALLOC_HEAP_H

#include "conf.h"
#include "span.h"

/* tcache: threads get heaps of their own (else every thread uses its
 * arena's shared heap); tcache_max: the largest size they serve. */
extern bool opt_tcache;
extern size_t opt_tcache_max;
extern const conf_table_t heap_conf_table;

/* The heap of a thread that has none (not set up yet, tcache:false, or
 * exiting): every class's current span is span_none. Never written. */
extern heap_t heap_none;

heap_t *heap_create(arena_t *a);
/* Gives every span back to the arena and the heap record to the registry. */
void heap_destroy(heap_t *h);
/* Gives every span back to the arena; the heap stays usable. */
void heap_flush(heap_t *h);
/* Gives the heap's empty spans back to the page heap, remote frees
 * counted (arena_purge on shared heaps). */
void heap_trim(heap_t *h);
/* heap_flush, then allocate from arena `to` from now on. */
void heap_move(heap_t *h, arena_t *to);
/* A block of class cls when the current span's pop failed; NULL when the
 * OS refuses memory. Shared heaps: called with the heap's lock held. */
void *heap_alloc_slow(heap_t *h, unsigned cls);
/* A page-run allocation of h's owner counts as a slow path toward h's next
 * idle sweep: a thread whose small classes keep a few live blocks each
 * (their cursor words never run dry) while it allocates page runs (the
 * grown buffers of bench-realloc) would never sweep. */
void heap_tick(heap_t *h);
/* The owner frees slot i of s outside the fast path: s is on the full
 * list or holds sampled slots. False: a double free (nothing changed). */
bool heap_free_owned(heap_t *h, span_t *s, uint32_t i);
/* heap_free_owned of a span whose owner_fast is span_full_tag(h): on the
 * full list of thread heap h, no live sample. */
bool heap_free_full(heap_t *h, span_t *s, uint32_t i);
/* The same for span_full_live_tag(h) (sampled mode): s may still hold a
 * live sample, so its frees stay off the fast path while one lives. */
bool heap_free_full_live(heap_t *h, span_t *s, uint32_t i);
/* The owner's free made s empty. */
void heap_span_empty(heap_t *h, span_t *s);
/* A remote free announces full span s to its owner h (any thread). */
void heap_queue_push(heap_t *h, span_t *s);

/* The decay thread: purges the free pages of the spans of every thread
 * heap that entered no slow path since the last call (heap.c). */
void heap_idle_sweep(void);

void heap_prefork(void);
void heap_postfork_parent(void);
/* Fork child: the heaps of threads that did not survive give their spans
 * back, unless they were mid-update (then they are dropped). */
void heap_postfork_child(heap_t *mine);

#endif
