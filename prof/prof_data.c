/* prof_data.c -- the profiler's tables: gctx (one per unique backtrace,
 * global hash), tdata (one per thread) and tctx (counters of one backtrace
 * as allocated by one thread), their creation, lookup and retirement, and
 * prof.reset. The ownership and locking rules are in prof_internal.h.
 * All memory comes from base_alloc: never from the profiled heap. */
#include "prof_internal.h"

#include <string.h>
#include <unistd.h>

nlock_t prof_tdatas_lock = NLOCK_INITIALIZER(LOCK_PROF_TDATAS);
nlock_t prof_gctx_lock = NLOCK_INITIALIZER(LOCK_PROF_GCTX);

prof_tdata_t *prof_tdatas;
_Atomic(prof_gctx_t *) prof_gctx_all;
_Atomic size_t prof_ntctx_total, prof_ngctx_total, prof_ntdata_total;

static uint64_t next_thr_uid;            /* prof_tdatas_lock */
static uint64_t next_gctx_id;            /* prof_gctx_lock */
static prof_gctx_t **gctx_tab;           /* prof_gctx_lock */
static size_t gctx_cap, gctx_n;

static inline uint64_t bt_hash(void *const *pcs, unsigned n) {
  uint64_t h = 0x84222325cbf29ce4ull ^ n;
  for (unsigned i = 0; i < n; i++) {
    h ^= (uint64_t)(uintptr_t)pcs[i];
    h *= 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  }
  return h ^ (h >> 32);
}

static inline bool bt_same(const prof_gctx_t *g, void *const *pcs, unsigned n);
static prof_tctx_t *tctx_find(prof_tdata_t *td, void **pcs, unsigned n);

static inline bool bt_eq(const prof_gctx_t *g, uint64_t h, void *const *pcs,
                         unsigned n) {
  return g->hash == h && bt_same(g, pcs, n);
}

/* ---- gctx --------------------------------------------------------------- */

/* Chained hash; the bucket array doubles when the load passes 1. Called
 * only when a thread meets a stack for the first time. */
static prof_gctx_t *gctx_get(void *const *pcs, unsigned n, uint64_t h) {
  nlock_lock(&prof_gctx_lock);
  if (gctx_tab != NULL) {
    for (prof_gctx_t *g = gctx_tab[h & (gctx_cap - 1)]; g; g = g->next_hash)
      if (bt_eq(g, h, pcs, n)) {
        nlock_unlock(&prof_gctx_lock);
        return g;
      }
  }
  if (gctx_n >= gctx_cap) {
    size_t ncap = gctx_cap ? gctx_cap * 2 : 1024;
    prof_gctx_t **nt = base_alloc(ncap * sizeof *nt);
    if (nt == NULL && gctx_tab == NULL) {
      nlock_unlock(&prof_gctx_lock);
      return NULL;
    }
    if (nt != NULL) {
      for (size_t i = 0; i < gctx_cap; i++) {
        prof_gctx_t *g = gctx_tab[i];
        while (g) {
          prof_gctx_t *nx = g->next_hash;
          g->next_hash = nt[g->hash & (ncap - 1)];
          nt[g->hash & (ncap - 1)] = g;
          g = nx;
        }
      }
      base_free(gctx_tab, gctx_cap * sizeof *gctx_tab);
      gctx_tab = nt;
      gctx_cap = ncap;
    }
  }
  prof_gctx_t *g = base_alloc(sizeof *g + n * sizeof(void *));
  if (g == NULL) {
    nlock_unlock(&prof_gctx_lock);
    return NULL;
  }
  g->id = next_gctx_id++;
  g->hash = h;
  g->nframes = n;
  memcpy(g->pcs, pcs, n * sizeof(void *));
  g->next_hash = gctx_tab[h & (gctx_cap - 1)];
  gctx_tab[h & (gctx_cap - 1)] = g;
  gctx_n++;
  g->next_all = atomic_load_explicit(&prof_gctx_all, memory_order_relaxed);
  atomic_store_explicit(&prof_gctx_all, g, memory_order_release);
  atomic_fetch_add_explicit(&prof_ngctx_total, 1, memory_order_relaxed);
  nlock_unlock(&prof_gctx_lock);
  return g;
}

/* ---- tdata -------------------------------------------------------------- */

static void tdata_link_locked(prof_tdata_t *td) {
  td->prev = NULL;
  td->next = prof_tdatas;
  if (prof_tdatas) prof_tdatas->prev = td;
  prof_tdatas = td;
  atomic_fetch_add_explicit(&prof_ntdata_total, 1, memory_order_relaxed);
}

static void tdata_unlink_locked(prof_tdata_t *td) {
  if (td->prev) td->prev->next = td->next;
  else prof_tdatas = td->next;
  if (td->next) td->next->prev = td->prev;
  atomic_fetch_sub_explicit(&prof_ntdata_total, 1, memory_order_relaxed);
}

static void tdata_free_tab(prof_tdata_t *td) {
  base_free(td->tab, td->tab_cap * sizeof *td->tab);
  td->tab = NULL;
  td->tab_cap = td->tab_n = 0;
  td->last = NULL;
  for (int i = 0; i < PROF_WALKS; i++) td->walks[i].tctx = NULL;
}

/* A new tdata for this thread; `old` (expired by prof.reset) passes on its
 * uid, name and active flag, as jemalloc's tdata reinit does. */
static prof_tdata_t *tdata_create(tsd_t *tsd, prof_tdata_t *old) {
  prof_tdata_t *td = base_alloc(sizeof *td);
  if (td == NULL) return NULL;
  td->prng = (uint64_t)(uintptr_t)tsd ^ nalloc_now_ns() ^
             ((uint64_t)getpid() << 32);
  (void)prof_prng_next(&td->prng);
  nlock_lock(&prof_tdatas_lock);
  td->lg = atomic_load_explicit(&prof_lg_sample, memory_order_relaxed);
  td->exact = td->lg == 0 && opt_lg_prof_interval < 0;
  if (old != NULL) {
    td->uid = old->uid;
    td->active = old->active;
    memcpy(td->name, old->name, sizeof td->name);
    td->prng ^= old->prng;
    td->stk_lo = old->stk_lo;
    td->stk_hi = old->stk_hi;
  } else {
    td->uid = next_thr_uid++;
    td->active = atomic_load_explicit(&prof_thread_active_init,
                                      memory_order_relaxed);
  }
  tdata_link_locked(td);
  if (old != NULL) {
    atomic_store_explicit(&old->detached, true, memory_order_relaxed);
    tdata_free_tab(old);
    if (prof_tdata_live(old) == 0) prof_tdata_destroy_locked(old, false);
  }
  nlock_unlock(&prof_tdatas_lock);
  tsd->prof_tdata = td;
  return td;
}

prof_tdata_t *prof_tdata_get(tsd_t *tsd, bool create) {
  prof_tdata_t *td = tsd->prof_tdata;
  if (likely(td != NULL) &&
      likely(!atomic_load_explicit(&td->expired, memory_order_relaxed)))
    return td;
  if (!create || tsd->state != TSD_NOMINAL) return td;
  return tdata_create(tsd, td);
}

/* ---- tctx --------------------------------------------------------------- */

static bool tab_insert(prof_tdata_t *td, prof_tctx_t *t) {
  if ((td->tab_n + 1) * 2 > td->tab_cap) {
    size_t ncap = td->tab_cap ? td->tab_cap * 2 : 64;
    prof_tctx_t **nt = base_alloc(ncap * sizeof *nt);
    if (nt == NULL) return false;
    for (size_t i = 0; i < td->tab_cap; i++) {
      prof_tctx_t *o = td->tab[i];
      if (o == NULL) continue;
      size_t j = o->hash & (ncap - 1);
      while (nt[j]) j = (j + 1) & (ncap - 1);
      nt[j] = o;
    }
    base_free(td->tab, td->tab_cap * sizeof *td->tab);
    td->tab = nt;
    td->tab_cap = ncap;
  }
  size_t j = t->hash & (td->tab_cap - 1);
  while (td->tab[j]) j = (j + 1) & (td->tab_cap - 1);
  td->tab[j] = t;
  td->tab_n++;
  return true;
}

/* Owner thread only. The per-thread table answers almost every lookup;
 * the global gctx lock is taken only for a stack new to this thread. */
static inline bool bt_same(const prof_gctx_t *g, void *const *pcs, unsigned n) {
  if (g->nframes != n) return false;
  for (unsigned i = 0; i < n; i++)
    if (g->pcs[i] != pcs[i]) return false;
  return true;
}

prof_tctx_t *prof_tctx_lookup(prof_tdata_t *td, void **pcs, unsigned n) {
  if (td->last != NULL && bt_same(td->last->gctx, pcs, n)) return td->last;
  prof_tctx_t *t = tctx_find(td, pcs, n);
  if (t != NULL) td->last = t;
  return t;
}

static prof_tctx_t *tctx_find(prof_tdata_t *td, void **pcs, unsigned n) {
  uint64_t h = bt_hash(pcs, n);
  if (likely(td->tab != NULL)) {
    size_t mask = td->tab_cap - 1;
    for (size_t j = h & mask;; j = (j + 1) & mask) {
      prof_tctx_t *t = td->tab[j];
      if (t == NULL) break;
      if (bt_eq(t->gctx, h, pcs, n)) return t;
    }
  }
  prof_gctx_t *g = gctx_get(pcs, n, h);
  if (g == NULL) return NULL;
  prof_tctx_t *t = base_alloc(sizeof *t);
  if (t == NULL) return NULL;
  t->tdata = td;
  t->gctx = g;
  t->hash = h;
  t->lg = td->lg;
  if (!tab_insert(td, t)) {
    base_free(t, sizeof *t);
    return NULL;
  }
  t->next = atomic_load_explicit(&td->tctxs, memory_order_relaxed);
  atomic_store_explicit(&td->tctxs, t, memory_order_release);
  atomic_fetch_add_explicit(&td->ntctx, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&prof_ntctx_total, 1, memory_order_relaxed);
  return t;
}

/* A consistent-enough snapshot of one tctx. Remote frees are read first:
 * each one we see was preceded (happens-before, through the program's
 * hand-over of the pointer) by the owner's increment, which we then see
 * too. The owner's own frees are read before its allocations for the same
 * reason; its relaxed stores promise no order to another thread, so the
 * clamp below keeps a racing snapshot from going negative. */
void prof_tctx_read(prof_tctx_t *t, prof_cnt_t *cur, prof_cnt_t *acc) {
  uint64_t r[C_N];
  for (int i = 0; i < C_N; i++)
    r[i] = atomic_load_explicit(&t->remote[i], memory_order_acquire);
  atomic_thread_fence(memory_order_acquire);
  for (int i = 0; i < C_N; i++) {
    uint64_t f = atomic_load_explicit(&t->freed[i], memory_order_relaxed) + r[i];
    uint64_t a = atomic_load_explicit(&t->alloc[i], memory_order_relaxed);
    cur->v[i] = a > f ? a - f : 0;
    if (acc) acc->v[i] = a;
  }
  if (t->lg == 0) { /* exact: the unbiased values are the raw ones */
    cur->v[C_UOBJS] = cur->v[C_OBJS] << PROF_FP;
    cur->v[C_UBYTES] = cur->v[C_BYTES];
    if (acc) {
      acc->v[C_UOBJS] = acc->v[C_OBJS] << PROF_FP;
      acc->v[C_UBYTES] = acc->v[C_BYTES];
    }
  }
  if (cur->v[C_OBJS] == 0) /* racing updates: no bytes without objects */
    cur->v[C_BYTES] = cur->v[C_UOBJS] = cur->v[C_UBYTES] = 0;
}

uint64_t prof_tdata_live(prof_tdata_t *td) {
  uint64_t live = 0;
  for (prof_tctx_t *t = atomic_load_explicit(&td->tctxs, memory_order_acquire);
       t; t = t->next) {
    uint64_t f = atomic_load_explicit(&t->remote[C_OBJS], memory_order_acquire);
    f += atomic_load_explicit(&t->freed[C_OBJS], memory_order_relaxed);
    uint64_t a = atomic_load_explicit(&t->alloc[C_OBJS], memory_order_relaxed);
    live += a > f ? a - f : 0;
  }
  return live;
}

/* Frees a tdata that nothing live points into. With `fold`, its
 * cumulative counters move to the gctxs so [alloc] totals survive it. */
void prof_tdata_destroy_locked(prof_tdata_t *td, bool fold) {
  tdata_unlink_locked(td);
  prof_tctx_t *t = atomic_load_explicit(&td->tctxs, memory_order_acquire);
  while (t) {
    prof_tctx_t *nx = t->next;
    if (fold) {
      prof_cnt_t cur, acc;
      prof_tctx_read(t, &cur, &acc);
      for (int i = 0; i < C_N; i++)
        atomic_fetch_add_explicit(&t->gctx->retired[i], acc.v[i],
                                  memory_order_relaxed);
    }
    base_free(t, sizeof *t);
    atomic_fetch_sub_explicit(&prof_ntctx_total, 1, memory_order_relaxed);
    t = nx;
  }
  tdata_free_tab(td);
  base_free(td, sizeof *td);
}

/* Thread exit. If nothing the thread allocated is live its counters go to
 * the gctxs now; otherwise the tdata stays (its rows, name and uid still
 * appear) until a dump finds it empty (prof_dump.c). */
void prof_tdata_detach(tsd_t *tsd) {
  prof_tdata_t *td = tsd->prof_tdata;
  if (td == NULL) return;
  tsd->prof_tdata = NULL;
  nlock_lock(&prof_tdatas_lock);
  atomic_store_explicit(&td->detached, true, memory_order_relaxed);
  tdata_free_tab(td);
  if (prof_tdata_live(td) == 0)
    prof_tdata_destroy_locked(
        td, !atomic_load_explicit(&td->expired, memory_order_relaxed));
  nlock_unlock(&prof_tdatas_lock);
}

/* prof.reset: new rate, every tdata expired (left out of dumps from now
 * on; each thread replaces its own on its next sample), and the retired
 * cumulative counters cleared. Objects sampled before the reset are still
 * subtracted from their old tctx when freed. */
void prof_reset(unsigned lg) {
  nlock_lock(&prof_dump_lock);
  nlock_lock(&prof_tdatas_lock);
  atomic_store_explicit(&prof_lg_sample, lg, memory_order_relaxed);
  prof_tdata_t *td = prof_tdatas;
  while (td) {
    prof_tdata_t *nx = td->next;
    atomic_store_explicit(&td->expired, true, memory_order_relaxed);
    if (atomic_load_explicit(&td->detached, memory_order_relaxed) &&
        prof_tdata_live(td) == 0)
      prof_tdata_destroy_locked(td, false);
    td = nx;
  }
  for (prof_gctx_t *g = atomic_load_explicit(&prof_gctx_all,
                                             memory_order_acquire);
       g; g = g->next_all)
    for (int i = 0; i < C_N; i++)
      atomic_store_explicit(&g->retired[i], 0, memory_order_relaxed);
  nlock_unlock(&prof_tdatas_lock);
  nlock_unlock(&prof_dump_lock);
}

/* In the child of fork() only the forking thread lives on: every other
 * tdata now belongs to a thread that no longer exists. */
void prof_data_postfork_child(tsd_t *tsd) {
  for (prof_tdata_t *td = prof_tdatas; td; td = td->next) {
    if (td == tsd->prof_tdata) continue;
    if (!atomic_load_explicit(&td->detached, memory_order_relaxed)) {
      atomic_store_explicit(&td->detached, true, memory_order_relaxed);
      tdata_free_tab(td);
    }
  }
}
