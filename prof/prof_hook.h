/* prof_hook.h -- the narrow hook between the allocator and the profiler:
 * the only prof/ header that alloc/ includes.
 *
 * Flow of a sampled allocation (alloc/ side, in the malloc slow path taken
 * when tsd->prof_countdown goes negative):
 *   tctx = prof_sample(tsd, size, caller, frame, &how);
 *                         sets the next countdown; NULL: do not record
 *   p = ...allocate as usual (how & PROF_OWN_PAGE: a page run of its own)...
 *   if (tctx) { p ? store (tctx, size) in p's span metadata
 *                 : prof_sample_cancel(tsd, tctx, size); }
 * and of its free (any thread): alloc/ finds (tctx, size) in the span,
 * clears it, then calls prof_sample_free(tctx, size, p, birth).
 * realloc samples the new object before it frees the old one.
 * For the profiler's views (issue 14):
 *   - temporary allocations: every allocation that reaches malloc_sampled
 *     (in exact mode, every allocation) stores its block in
 *     tsd->prof_last, so that a free can tell the block is the thread's
 *     latest (nothing else allocated since);
 *   - lifetimes (how & PROF_TIMED: sampled mode): a sampled block keeps
 *     its birth time, in its span record (large_birth) or beside its
 *     slot's record (sample.c);
 *   - NUMA nodes: a thread's blocks come from its arena, so the node is
 *     the arena's; thread.arena tells the profiler (prof_thread_arena). */
#ifndef PROF_HOOK_H
#define PROF_HOOK_H

#include "../alloc/internal.h"

/* opt.prof: set by NALLOC_CONF, read-only afterwards. When false nothing
 * below is called except prof_boot/prof_boot_late and the fork hooks. */
extern bool opt_prof;

/* Called once while the allocator initialises, after NALLOC_CONF is
 * parsed: must not call malloc. */
void prof_boot(void);
/* Called from the library constructor, when malloc works: installs the
 * signal trigger, the exit dump, and primes the unwinder. */
void prof_boot_late(void);

/* Requested bytes until this thread's next sample (exponential, mean
 * 2^lg_prof_sample): the request that takes the countdown below 0 is
 * sampled. -1 when lg_prof_sample is 0, so that every request is sampled,
 * malloc(0) and malloc(1) included. [prof: was "1", which would have let
 * malloc(1) through with alloc's `< 0` test; doc-only change.] */
int64_t prof_next_wait(tsd_t *tsd);
/* What prof_sample asks of the allocation it sampled (`*how`, which the
 * caller sets to 0 first). */
enum {
  PROF_OWN_PAGE = 1, /* samples are rare (one in 2^16 bytes or fewer):
                        a small block under SAMPLE_SPAN_MIN (4 KiB) gets a
                        page run of its own, so that its span need not
                        keep records (alloc/sample.h) */
  PROF_TIMED = 2,    /* keep its birth time (os_stamp) for the free:
                        the lifetime histogram of sampled mode */
};
/* Sets the thread's next countdown; then captures the backtrace (frame
 * 0 = return address in the caller of the public entry point, `caller`)
 * and counts one object of `size` requested bytes against it. `frame` is
 * the public entry point's frame pointer, or that of a nalloc function
 * between it and here (then the profiler searches up for the entry).
 * Returns the tctx to store with the object, or NULL when this allocation
 * is not recorded (inactive, out of metadata memory). `*how` gets the
 * PROF_* flags the allocation should follow. */
void *prof_sample(tsd_t *tsd, size_t size, const void *caller,
                  const void *frame, unsigned *how);
/* The allocation prof_sample counted failed: takes it back out. */
void prof_sample_cancel(tsd_t *tsd, void *tctx, size_t size);
/* Subtracts one object of `size` bytes from tctx; any thread may call.
 * `p`: the block (compared with tsd->prof_last: a temporary allocation);
 * `birth`: os_stamp() when it was allocated, 0 if not kept. */
void prof_sample_free(void *tctx, size_t size, const void *p, uint64_t birth);
/* The calling thread now allocates from arena i (thread.arena). */
void prof_thread_arena(tsd_t *tsd, unsigned i);

/* Bytes the profiler has mapped for its own records (prof_mem.c, not
 * base_alloc): part of stats.metadata. */
size_t prof_stats_mapped(void);
/* One stats_print line: where the profiler's own memory goes. */
void prof_stats_print(void);

/* Thread exit (from the allocator's TSD destructor). */
void prof_thread_exit(tsd_t *tsd);

/* Fork: called first in prefork, last in the postfork handlers. */
void prof_prefork(void);
void prof_postfork_parent(void);
void prof_postfork_child(void);

/* NALLOC_CONF keys and ctl names owned by the profiler, one table per
 * module that owns them (alloc/conf.c and alloc/ctl.c list them). */
extern const conf_table_t prof_conf_table;      /* prof.c */
extern const conf_table_t prof_http_conf_table; /* prof_http.c */
extern const conf_table_t prof_peak_conf_table; /* prof_peak.c */
extern const ctl_table_t prof_ctl_table;        /* prof_ctl.c: prof.*, thread.prof.* */
extern const ctl_table_t prof_http_ctl_table;   /* prof_http.c: prof.http_address */

#endif
