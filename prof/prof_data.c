/* prof_data.c -- the profiler's tables: gctx (one per unique backtrace,
 * global hash), thread records and tdata (one per thread) and tctx
 * (counters of one backtrace and size bucket as allocated by one thread):
 * their creation, lookup, retirement and reclamation, and prof.reset.
 * The ownership, lifetime and locking rules are in prof_internal.h.
 * All memory comes from prof_mem.c: never from the profiled heap. */
#include "prof_internal.h"

#include <string.h>
#include <unistd.h>

nlock_t prof_tdatas_lock = NLOCK_INITIALIZER(LOCK_PROF_TDATAS);
nlock_t prof_gctx_lock = NLOCK_INITIALIZER(LOCK_PROF_GCTX);

prof_trec_t *prof_tdatas, *prof_dead;
prof_trec_t prof_orphans = {.uid = UINT64_MAX};
_Atomic unsigned prof_reset_gen;
_Atomic(prof_gctx_t *) prof_gctx_all;
_Atomic size_t prof_ntctx_total, prof_ngctx_total, prof_ntdata_total,
    prof_nret_total;

static uint64_t next_thr_uid;            /* prof_tdatas_lock */
static uint64_t next_gctx_id;            /* prof_gctx_lock */
static prof_gctx_t **gctx_tab;           /* prof_gctx_lock */
static size_t gctx_cap, gctx_n;

/* Dead-list sweeps (amortized, see prof_dead_zeroed): tctxs on dead
 * records, how many there were after the last sweep, and how many remote
 * frees emptied one since. */
static size_t dead_ntctx;                /* prof_tdatas_lock */
static _Atomic size_t dead_floor;
static _Atomic size_t dead_zeroed;

static inline uint64_t bt_hash(void *const *pcs, unsigned n) {
  uint64_t h = PROF_BT_HASH_SEED;
  for (unsigned i = n; i-- > 0;) h = prof_bt_hash_step(h, (uintptr_t)pcs[i]);
  return prof_bt_hash_fin(h, n);
}

/* memcmp, not a loop: CPython's test suite walks stacks of ~120 frames
 * and found most of them in the table, so this compare was 10% of its
 * exact profile's instructions, a tenth of that vectorised. */
static inline bool bt_same(const prof_gctx_t *g, void *const *pcs, unsigned n) {
  if (g->nframes != n) return false;
  unsigned k = n < PROF_LEAF ? n : PROF_LEAF;
  if (memcmp(g->pcs, pcs, k * sizeof *pcs) != 0) return false;
  for (const prof_tail_t *t = g->tail; t != NULL; k += t->n, t = t->up)
    if (memcmp(t->pcs, pcs + k, t->n * sizeof *pcs) != 0) return false;
  return true;
}

static size_t gctx_size(unsigned n) {
  return sizeof(prof_gctx_t) + (n < PROF_LEAF ? n : PROF_LEAF) * sizeof(void *);
}

/* ---- interned tails (prof_gctx_lock) ------------------------------------ */

static prof_tail_t **tail_tab;
static size_t tail_cap, tail_n;

static size_t tail_size(unsigned n) {
  return sizeof(prof_tail_t) + n * sizeof(void *);
}

static void tail_tab_grow(void) {
  size_t ncap = tail_cap ? tail_cap * 2 : 256;
  prof_tail_t **nt = prof_mem_alloc(ncap * sizeof *nt, PM_TAB);
  if (nt == NULL) return; /* longer chains */
  for (size_t i = 0; i < tail_cap; i++)
    for (prof_tail_t *t = tail_tab[i], *nx; t; t = nx) {
      nx = t->next_hash;
      t->next_hash = nt[t->hash & (ncap - 1)];
      nt[t->hash & (ncap - 1)] = t;
    }
  prof_mem_free(tail_tab, tail_cap * sizeof *tail_tab, PM_TAB);
  tail_tab = nt;
  tail_cap = ncap;
}

static void tail_put(prof_tail_t *t);

/* The shared tail with these frames, one more reference (NULL: out of
 * memory): its first chunk, whose `up` holds the rest in whole chunks
 * (chunks are counted from the outermost frame: see prof_tail_t). */
static prof_tail_t *tail_get(void *const *pcs, unsigned n) {
  unsigned k = n - (n - 1) / PROF_TAIL_CHUNK * PROF_TAIL_CHUNK;
  prof_tail_t *up = NULL;
  if (n > k && (up = tail_get(pcs + k, n - k)) == NULL) return NULL;
  uint64_t h = bt_hash(pcs, k) ^ (uint64_t)(uintptr_t)up * 0x9fb21c651e98df25ull;
  if (tail_n >= tail_cap) tail_tab_grow();
  if (tail_tab == NULL) {
    tail_put(up);
    return NULL;
  }
  prof_tail_t **head = &tail_tab[h & (tail_cap - 1)];
  for (prof_tail_t *t = *head; t; t = t->next_hash)
    if (t->hash == h && t->n == k && t->up == up &&
        memcmp(t->pcs, pcs, k * sizeof(void *)) == 0) {
      t->nref++;
      if (up != NULL) up->nref--; /* t holds its own (so it stays above 0) */
      return t;
    }
  prof_tail_t *t = prof_mem_alloc(tail_size(k), PM_GCTX);
  if (t == NULL) {
    tail_put(up);
    return NULL;
  }
  t->hash = h;
  t->n = k;
  t->up = up; /* takes the reference tail_get gave */
  t->nref = 1;
  memcpy(t->pcs, pcs, k * sizeof(void *));
  t->next_hash = *head;
  *head = t;
  tail_n++;
  return t;
}

static void tail_put(prof_tail_t *t) {
  while (t != NULL && --t->nref == 0) {
    prof_tail_t **pp = &tail_tab[t->hash & (tail_cap - 1)];
    while (*pp != t) pp = &(*pp)->next_hash;
    *pp = t->next_hash;
    tail_n--;
    prof_tail_t *up = t->up;
    prof_mem_free(t, tail_size(t->n), PM_GCTX);
    t = up;
  }
}

/* ---- gctx --------------------------------------------------------------- */

/* gctxs per bucket before the table doubles: it is searched only when a
 * thread meets a stack for the first time (a chain step is a gctx's line
 * to read), and at a load of 1 its buckets were 0.5 MiB of CPython's
 * tests' 16 MB of records (48k stacks). The tail table stays at 1: it is
 * searched for every chunk of a new stack's tail (~6 for CPython's), and
 * its buckets are an eighth as many. */
#define PROF_GCTX_LOAD 2

static void gctx_tab_grow(void) {
  size_t ncap = gctx_cap ? gctx_cap * 2 : 1024;
  prof_gctx_t **nt = prof_mem_alloc(ncap * sizeof *nt, PM_TAB);
  if (nt == NULL) return; /* longer chains, still correct */
  for (size_t i = 0; i < gctx_cap; i++) {
    prof_gctx_t *g = gctx_tab[i];
    while (g) {
      prof_gctx_t *nx = g->next_hash;
      g->next_hash = nt[g->hash & (ncap - 1)];
      nt[g->hash & (ncap - 1)] = g;
      g = nx;
    }
  }
  prof_mem_free(gctx_tab, gctx_cap * sizeof *gctx_tab, PM_TAB);
  gctx_tab = nt;
  gctx_cap = ncap;
}

/* Chained hash; the bucket array doubles when the load passes
 * PROF_GCTX_LOAD. Called only when a thread meets a stack for the first
 * time. Returns the gctx
 * with one more reference (the caller's new tctx). */
static prof_gctx_t *gctx_get(void *const *pcs, unsigned n, uint64_t h) {
  nlock_lock(&prof_gctx_lock);
  if (gctx_tab != NULL) {
    for (prof_gctx_t *g = gctx_tab[h & (gctx_cap - 1)]; g; g = g->next_hash)
      if (g->hash == h && bt_same(g, pcs, n)) {
        g->nref++;
        nlock_unlock(&prof_gctx_lock);
        return g;
      }
  }
  if (gctx_n >= PROF_GCTX_LOAD * gctx_cap) gctx_tab_grow();
  prof_gctx_t *g = gctx_tab ? prof_mem_alloc(gctx_size(n), PM_GCTX) : NULL;
  prof_tail_t *tail = NULL;
  if (g != NULL && n > PROF_LEAF &&
      (tail = tail_get(pcs + PROF_LEAF, n - PROF_LEAF)) == NULL) {
    prof_mem_free(g, gctx_size(n), PM_GCTX);
    g = NULL;
  }
  if (g == NULL) {
    nlock_unlock(&prof_gctx_lock);
    return NULL;
  }
  g->id = next_gctx_id++;
  g->hash = h;
  g->nframes = (uint16_t)n;
  g->nref = 1;
  g->tail = tail;
  memcpy(g->pcs, pcs, (n < PROF_LEAF ? n : PROF_LEAF) * sizeof(void *));
  g->next_hash = gctx_tab[h & (gctx_cap - 1)];
  gctx_tab[h & (gctx_cap - 1)] = g;
  gctx_n++;
  g->next_all = atomic_load_explicit(&prof_gctx_all, memory_order_relaxed);
  atomic_store_explicit(&prof_gctx_all, g, memory_order_release);
  atomic_fetch_add_explicit(&prof_ngctx_total, 1, memory_order_relaxed);
  nlock_unlock(&prof_gctx_lock);
  return g;
}

static void gctx_unref(prof_gctx_t *g) {
  nlock_lock(&prof_gctx_lock);
  g->nref--;
  nlock_unlock(&prof_gctx_lock);
}

/* g's side record, made if it has none (NULL: out of memory). Any thread:
 * lifetimes are added without a lock. */
NALLOC_NOINLINE prof_gext_t *prof_gctx_ext_new(prof_gctx_t *g) {
  prof_gext_t *x = NULL;
  prof_gext_t *fresh = prof_mem_alloc(sizeof *fresh, PM_GCTX);
  if (fresh == NULL) return NULL;
  if (atomic_compare_exchange_strong_explicit(&g->ext, &x, fresh,
                                              memory_order_acq_rel,
                                              memory_order_acquire))
    return fresh;
  prof_mem_free(fresh, sizeof *fresh, PM_GCTX);
  return x;
}

static void ret_free_all(prof_gctx_t *g) {
  prof_gext_t *x = atomic_load_explicit(&g->ext, memory_order_acquire);
  if (x == NULL) return;
  prof_ret_t *r = x->ret;
  x->ret = NULL;
  while (r) {
    prof_ret_t *nx = r->next;
    prof_mem_free(r, sizeof *r, PM_GCTX);
    atomic_fetch_sub_explicit(&prof_nret_total, 1, memory_order_relaxed);
    r = nx;
  }
}

static void gctx_hash_del(prof_gctx_t *g) {
  prof_gctx_t **pp = &gctx_tab[g->hash & (gctx_cap - 1)];
  while (*pp != g) pp = &(*pp)->next_hash;
  *pp = g->next_hash;
  gctx_n--;
}

/* After ret_free_all (every profiler lock held: a reaped gctx). */
static void ext_free(prof_gctx_t *g) {
  prof_gext_t *x = atomic_load_explicit(&g->ext, memory_order_acquire);
  if (x != NULL) prof_mem_free(x, sizeof *x, PM_GCTX);
  atomic_store_explicit(&g->ext, NULL, memory_order_relaxed);
}

/* The end of a dump (every profiler lock held): a gctx that the dump found
 * idle (nothing points to it, nothing new since the previous dump wrote
 * its counts) and that is still so goes. */
void prof_gctx_reap_locked(void) {
  prof_gctx_t *g = atomic_load_explicit(&prof_gctx_all, memory_order_relaxed);
  prof_gctx_t *prev = NULL;
  while (g) {
    prof_gctx_t *nx = g->next_all;
    if (g->idle && g->nref == 0 && !g->ret_new) {
      if (prev) prev->next_all = nx;
      else atomic_store_explicit(&prof_gctx_all, nx, memory_order_release);
      gctx_hash_del(g);
      ret_free_all(g);
      ext_free(g);
      tail_put(g->tail);
      prof_mem_free(g, gctx_size(g->nframes), PM_GCTX);
      atomic_fetch_sub_explicit(&prof_ngctx_total, 1, memory_order_relaxed);
    } else {
      prev = g;
    }
    g = nx;
  }
}

/* ---- tctx counters ------------------------------------------------------ */

/* A consistent-enough snapshot of one tctx. Remote frees are read first:
 * each one we see was preceded (happens-before, through the program's
 * hand-over of the pointer) by the owner's increment, which we then see
 * too. The owner's own frees are read before its allocations for the same
 * reason; its relaxed stores promise no order to another thread, so the
 * clamp below keeps a racing snapshot from going negative. */
void prof_tctx_read(prof_tctx_t *t, prof_cnt_t *cur, prof_cnt_t *acc) {
  uint64_t r[C_N];
  unsigned nc = prof_tctx_nc(t);
  _Atomic uint64_t *ra = prof_tctx_cnt(t, PC_REMOTE),
                   *fa = prof_tctx_cnt(t, PC_FREED),
                   *aa = prof_tctx_cnt(t, PC_ALLOC);
  for (unsigned i = 0; i < nc; i++)
    r[i] = atomic_load_explicit(&ra[i], memory_order_acquire);
  atomic_thread_fence(memory_order_acquire);
  for (unsigned i = 0; i < nc; i++) {
    uint64_t f = atomic_load_explicit(&fa[i], memory_order_relaxed) + r[i];
    uint64_t a = atomic_load_explicit(&aa[i], memory_order_relaxed);
    /* the unbiased sums of sampled mode are terms (prof_unbias_terms),
     * some below 0: they subtract modulo 2^64, prof_cnt_unbias clamps */
    cur->v[i] = a > f || i >= C_UOBJS ? a - f : 0;
    if (acc) acc->v[i] = a;
  }
  if (t->lg == 0) {
    prof_cnt_exact(cur);
    if (acc) prof_cnt_exact(acc);
  } else {
    prof_cnt_unbias(cur, t->lg);
    if (acc) prof_cnt_unbias(acc, t->lg);
  }
  if (cur->v[C_OBJS] == 0) /* racing updates: no bytes without objects */
    cur->v[C_BYTES] = cur->v[C_UOBJS] = cur->v[C_UBYTES] = 0;
}

/* Live objects of t: the remote frees first (see prof_tctx_read). */
static uint64_t tctx_live(prof_tctx_t *t) {
  uint64_t f = atomic_load_explicit(&prof_tctx_cnt(t, PC_REMOTE)[C_OBJS],
                                    memory_order_acquire);
  f += atomic_load_explicit(&prof_tctx_cnt(t, PC_FREED)[C_OBJS],
                            memory_order_relaxed);
  uint64_t a = atomic_load_explicit(&prof_tctx_cnt(t, PC_ALLOC)[C_OBJS],
                                    memory_order_relaxed);
  return a > f ? a - f : 0;
}

/* ---- reclaiming a tctx (prof_tdatas_lock) ------------------------------- */

/* Moves t's cumulative counts to its gctx (bucket by bucket), so that
 * [alloc] totals survive it. `shown`: a dump has written them already. */
static void tctx_fold(prof_tctx_t *t, bool shown) {
  prof_cnt_t cur, acc;
  prof_tctx_read(t, &cur, &acc);
  if (acc.v[C_OBJS] == 0) return;
  prof_gctx_t *g = t->gctx;
  prof_gext_t *x = prof_gctx_ext(g);
  if (x == NULL) return; /* lost */
  prof_ret_t *r = x->ret;
  while (r && (r->bkt != t->bkt || r->node != t->node)) r = r->next;
  if (r == NULL) {
    if ((r = prof_mem_alloc(sizeof *r, PM_GCTX)) == NULL) return; /* lost */
    atomic_fetch_add_explicit(&prof_nret_total, 1, memory_order_relaxed);
    r->bkt = t->bkt;
    r->node = t->node;
    r->next = x->ret;
    x->ret = r;
  }
  for (int i = 0; i < C_N; i++) r->acc[i] += acc.v[i];
  r->temp += atomic_load_explicit(&t->temp, memory_order_relaxed);
  if (!shown) g->ret_new = true;
}

/* Frees t (unlinked by the caller). `fold`: keep its cumulative counts
 * (not after prof.reset, which forgot them). */
static void tctx_free(prof_tctx_t *t, bool fold) {
  if (fold)
    tctx_fold(t, atomic_load_explicit(&prof_tctx_cnt(t, PC_ALLOC)[C_OBJS],
                                      memory_order_relaxed) == t->dumped);
  gctx_unref(t->gctx);
  prof_mem_free(t, prof_tctx_size(t->lg), PM_TCTX);
  atomic_fetch_sub_explicit(&prof_ntctx_total, 1, memory_order_relaxed);
}

/* ---- the owner's (stack, bucket) table ---------------------------------- */

/* Open addressing, filled to at most 3/4 (entries: prof_tab_tag).
 * Whether a table of capacity cap holds n entries within its load: */
static inline bool tab_fits(size_t n, size_t cap) { return 4 * n <= 3 * cap; }

/* t's key in the table: its stack's hash mixed with its bucket and node
 * (not kept in t: the 8 bytes took an exact-mode tctx past 96). */
static inline uint64_t tctx_hash(const prof_tctx_t *t) {
  return t->gctx->hash ^ prof_key_mix(t->bkt, t->node);
}

static void tab_put(uintptr_t *tab, size_t cap, prof_tctx_t *t) {
  nalloc_assert(((uintptr_t)t & ~PROF_TAB_PTR) == 0);
  uint64_t h = tctx_hash(t);
  size_t j = h & (cap - 1);
  while (tab[j]) j = (j + 1) & (cap - 1);
  tab[j] = (uintptr_t)t | prof_tab_tag(h);
}

/* Builds a table of capacity `cap` (a power of two that fits the tctxs:
 * tab_fits) from the owner's list. */
static void tab_rebuild(prof_tdata_t *td, size_t cap) {
  uintptr_t *nt = prof_mem_alloc(cap * sizeof *nt, PM_TAB);
  if (nt == NULL) { /* no memory: refill the old array in place */
    nt = td->tab;
    cap = td->tab_cap;
    memset(nt, 0, cap * sizeof *nt);
  }
  size_t n = 0;
  for (prof_tctx_t *t = atomic_load_explicit(&td->rec.tctxs,
                                             memory_order_relaxed);
       t; t = t->next) {
    tab_put(nt, cap, t);
    n++;
  }
  if (nt != td->tab)
    prof_mem_free(td->tab, td->tab_cap * sizeof *td->tab, PM_TAB);
  td->tab = nt;
  td->tab_cap = cap;
  td->tab_n = n;
}

static bool tab_insert(prof_tdata_t *td, prof_tctx_t *t) {
  if (!tab_fits(td->tab_n + 1, td->tab_cap)) {
    size_t ncap = td->tab_cap ? td->tab_cap * 2 : 64;
    uintptr_t *nt = prof_mem_alloc(ncap * sizeof *nt, PM_TAB);
    if (nt == NULL) return false;
    for (size_t i = 0; i < td->tab_cap; i++)
      if (td->tab[i] != 0) tab_put(nt, ncap, prof_tab_tctx(td->tab[i]));
    prof_mem_free(td->tab, td->tab_cap * sizeof *td->tab, PM_TAB);
    td->tab = nt;
    td->tab_cap = ncap;
  }
  tab_put(td->tab, td->tab_cap, t);
  td->tab_n++;
  return true;
}

static void tdata_free_tab(prof_tdata_t *td) {
  prof_mem_free(td->tab, td->tab_cap * sizeof *td->tab, PM_TAB);
  td->tab = NULL;
  td->tab_cap = td->tab_n = 0;
  td->last = NULL;
  for (int i = 0; i < PROF_WALKS; i++) td->walks[i].tctx = NULL;
}

/* ---- tctx lookup (owner thread only) ------------------------------------ */

static prof_tctx_t *tctx_new(prof_tdata_t *td, prof_gctx_t *g, uint64_t h,
                             unsigned bkt) {
  prof_tctx_t *t = prof_mem_alloc(prof_tctx_size(td->lg), PM_TCTX);
  if (t == NULL) {
    gctx_unref(g);
    return NULL;
  }
  atomic_store_explicit(&t->owner, &td->rec, memory_order_relaxed);
  t->gen = (uint16_t)atomic_load_explicit(&prof_reset_gen, memory_order_relaxed);
  t->gctx = g;
  t->lg = (uint8_t)td->lg;
  t->bkt = (uint8_t)bkt;
  t->node = td->node;
  nalloc_assert(tctx_hash(t) == h);
  t->dumped = UINT64_MAX; /* no dump has seen it */
  /* It held nothing at the last peak: its copy of that moment is 0. */
  if (opt_prof_peak)
    atomic_store_explicit(prof_tctx_pk_epoch(t),
                          atomic_load_explicit(&prof_pk_epoch,
                                               memory_order_acquire),
                          memory_order_relaxed);
  if (!tab_insert(td, t)) {
    prof_mem_free(t, prof_tctx_size(td->lg), PM_TCTX);
    gctx_unref(g);
    return NULL;
  }
  t->next = atomic_load_explicit(&td->rec.tctxs, memory_order_relaxed);
  atomic_store_explicit(&td->rec.tctxs, t, memory_order_release);
  atomic_fetch_add_explicit(&td->rec.ntctx, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&prof_ntctx_total, 1, memory_order_relaxed);
  return t;
}

static prof_tctx_t *tctx_find(prof_tdata_t *td, void **pcs, unsigned n,
                              uint64_t hs) {
  unsigned bkt = td->want_bkt;
  uint64_t h = hs ^ prof_key_mix(bkt, td->node);
  if (likely(td->tab != NULL)) {
    size_t mask = td->tab_cap - 1;
    uintptr_t tag = prof_tab_tag(h);
    for (size_t j = h & mask;; j = (j + 1) & mask) {
      uintptr_t e = td->tab[j];
      if (e == 0) break;
      if ((e & ~PROF_TAB_PTR) != tag) continue;
      prof_tctx_t *t = prof_tab_tctx(e);
      if (t->bkt == bkt && t->node == td->node && t->gctx->hash == hs &&
          bt_same(t->gctx, pcs, n))
        return t;
    }
  }
  prof_gctx_t *g = gctx_get(pcs, n, hs);
  if (g == NULL) return NULL;
  return tctx_new(td, g, h, bkt);
}

/* Owner thread only. The per-thread table answers almost every lookup;
 * the global gctx lock is taken only for a stack new to this thread. */
prof_tctx_t *prof_tctx_lookup_hashed(prof_tdata_t *td, void **pcs, unsigned n,
                                     uint64_t hs) {
  nalloc_assert(hs == bt_hash(pcs, n));
  prof_tctx_t *l = td->last;
  if (l != NULL && l->gctx->hash == hs && l->bkt == td->want_bkt &&
      l->node == td->node && bt_same(l->gctx, pcs, n))
    return l;
  prof_tctx_t *t = tctx_find(td, pcs, n, hs);
  if (t != NULL) td->last = t;
  return t;
}

prof_tctx_t *prof_tctx_lookup(prof_tdata_t *td, void **pcs, unsigned n) {
  return prof_tctx_lookup_hashed(td, pcs, n, bt_hash(pcs, n));
}

prof_tctx_t *prof_tctx_bucket(prof_tdata_t *td, prof_tctx_t *any,
                              unsigned bkt) {
  prof_gctx_t *g = any->gctx;
  uint64_t h = g->hash ^ prof_key_mix(bkt, td->node);
  if (likely(td->tab != NULL)) {
    size_t mask = td->tab_cap - 1;
    uintptr_t tag = prof_tab_tag(h);
    for (size_t j = h & mask;; j = (j + 1) & mask) {
      uintptr_t e = td->tab[j];
      if (e == 0) break;
      if ((e & ~PROF_TAB_PTR) != tag) continue;
      prof_tctx_t *t = prof_tab_tctx(e);
      if (t->gctx == g && t->bkt == bkt && t->node == td->node) return t;
    }
  }
  nlock_lock(&prof_gctx_lock);
  g->nref++; /* alive: `any` points to it */
  nlock_unlock(&prof_gctx_lock);
  return tctx_new(td, g, h, bkt);
}

/* ---- thread records ----------------------------------------------------- */

static void list_link(prof_trec_t **head, prof_trec_t *r) {
  r->prev = NULL;
  r->next = *head;
  if (*head) (*head)->prev = r;
  *head = r;
}

static void list_unlink(prof_trec_t **head, prof_trec_t *r) {
  if (r->prev) r->prev->next = r->next;
  else *head = r->next;
  if (r->next) r->next->prev = r->prev;
  r->next = r->prev = NULL;
}

/* Nothing of t is live, and the peak profile does not need it. */
static bool tctx_idle(prof_tctx_t *t) {
  return tctx_live(t) == 0 && !prof_peak_held(t);
}

/* Made before the last prof.reset (whose counts were forgotten)? */
static bool tctx_expired(const prof_tctx_t *t) {
  return t->gen != (uint16_t)atomic_load_explicit(&prof_reset_gen,
                                                  memory_order_relaxed);
}

/* Frees r's idle tctxs (all of them: `all`), folding their counts unless
 * they expired. Returns how many remain. */
static size_t trec_prune(prof_trec_t *r, bool all) {
  bool fold = !atomic_load_explicit(&r->expired, memory_order_relaxed);
  size_t left = 0;
  prof_tctx_t *t = atomic_load_explicit(&r->tctxs, memory_order_relaxed);
  prof_tctx_t *keep = NULL, **tail = &keep;
  while (t) {
    prof_tctx_t *nx = t->next;
    if (all || tctx_idle(t)) {
      tctx_free(t, fold && !tctx_expired(t));
    } else {
      *tail = t;
      tail = &t->next;
      left++;
    }
    t = nx;
  }
  *tail = NULL;
  atomic_store_explicit(&r->tctxs, keep, memory_order_release);
  atomic_store_explicit(&r->ntctx, left, memory_order_relaxed);
  return left;
}

/* The thread of td is gone (or td was replaced after prof.reset): what it
 * counted that is still live moves to a small standalone record on the
 * dead list, the rest folds into the gctxs, and the tdata is freed. */
static void tdata_retire_locked(prof_tdata_t *td) {
  list_unlink(&prof_tdatas, &td->rec);
  prof_peak_detach(td);
  tdata_free_tab(td);
  size_t left = trec_prune(&td->rec, false);
  prof_trec_t *r = NULL;
  if (left > 0 && (r = prof_mem_alloc(sizeof *r, PM_TREC)) != NULL) {
    r->uid = td->rec.uid;
    memcpy(r->name, td->rec.name, sizeof r->name);
    atomic_store_explicit(&r->expired,
                          atomic_load_explicit(&td->rec.expired,
                                               memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&r->tctxs,
                          atomic_load_explicit(&td->rec.tctxs,
                                               memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&r->ntctx, left, memory_order_relaxed);
    /* A free that reads the new owner or the old one goes the remote
     * way: neither is any running thread's tdata. */
    atomic_store_explicit(&r->detached, true, memory_order_release);
  } else if (left > 0) { /* no memory for a record: keep the whole tdata */
    r = &td->rec;
    atomic_store_explicit(&r->detached, true, memory_order_release);
    td = NULL;
  }
  /* A remote free reads `dead` (never the owner record, which may be
   * freed under it) before it trusts the frozen counters. */
  if (r != NULL)
    for (prof_tctx_t *t = atomic_load_explicit(&r->tctxs, memory_order_relaxed);
         t; t = t->next) {
      atomic_store_explicit(&t->owner, r, memory_order_release);
      atomic_store_explicit(&t->dead, true, memory_order_release);
    }
  if (r != NULL) {
    list_link(&prof_dead, r);
    dead_ntctx += left;
  } else {
    atomic_fetch_sub_explicit(&prof_ntdata_total, 1, memory_order_relaxed);
  }
  if (td != NULL) prof_mem_free(td, sizeof *td, PM_TDATA);
}

/* A standalone record, or a whole tdata kept as one for lack of memory
 * (tdata_retire_locked). */
static void trec_free(prof_trec_t *r) {
  if (r->in_tdata)
    prof_mem_free(r, sizeof(prof_tdata_t), PM_TDATA);
  else
    prof_mem_free(r, sizeof *r, PM_TREC);
}

/* Its thread row has been in a dump: what remains of the thread are its
 * tctxs, which the orphans' record keeps from now on. Their owner changes
 * under concurrent frees, which only compare it (neither record is any
 * running thread's tdata). */
void prof_dead_orphan_locked(prof_trec_t *r) {
  prof_tctx_t *t = atomic_load_explicit(&r->tctxs, memory_order_relaxed);
  if (t == NULL) return;
  prof_tctx_t *last = NULL;
  size_t n = 0;
  for (; t; t = t->next) {
    atomic_store_explicit(&t->owner, &prof_orphans, memory_order_relaxed);
    last = t;
    n++;
  }
  last->next = atomic_load_explicit(&prof_orphans.tctxs, memory_order_relaxed);
  atomic_store_explicit(&prof_orphans.tctxs,
                        atomic_load_explicit(&r->tctxs, memory_order_relaxed),
                        memory_order_release);
  atomic_fetch_add_explicit(&prof_orphans.ntctx, n, memory_order_relaxed);
  atomic_store_explicit(&r->tctxs, NULL, memory_order_relaxed);
  atomic_store_explicit(&r->ntctx, 0, memory_order_relaxed);
  list_unlink(&prof_dead, r);
  trec_free(r);
  atomic_fetch_sub_explicit(&prof_ntdata_total, 1, memory_order_relaxed);
}

void prof_dead_sweep_locked(void) {
  prof_trec_t *r = prof_dead;
  size_t n = trec_prune(&prof_orphans, false);
  while (r) {
    prof_trec_t *nx = r->next;
    size_t left = trec_prune(r, false);
    if (left == 0) {
      list_unlink(&prof_dead, r);
      trec_free(r);
      atomic_fetch_sub_explicit(&prof_ntdata_total, 1, memory_order_relaxed);
    }
    n += left;
    r = nx;
  }
  dead_ntctx = n;
  atomic_store_explicit(&dead_floor, n, memory_order_relaxed);
  atomic_store_explicit(&dead_zeroed, 0, memory_order_relaxed);
}

/* Amortized: a sweep walks every dead tctx, so it runs when half of those
 * counted at the last sweep were emptied, or when their number doubled. */
static bool dead_sweep_due(void) {
  size_t z = atomic_load_explicit(&dead_zeroed, memory_order_relaxed);
  size_t f = atomic_load_explicit(&dead_floor, memory_order_relaxed);
  return (z > 0 && 2 * z >= f) || dead_ntctx >= 2 * f + 64;
}

void prof_dead_zeroed(void) {
  size_t z = atomic_fetch_add_explicit(&dead_zeroed, 1, memory_order_relaxed) + 1;
  if (2 * z < atomic_load_explicit(&dead_floor, memory_order_relaxed)) return;
  if (nlock_held_by_me(&prof_tdatas_lock) || !nlock_trylock(&prof_tdatas_lock))
    return; /* the next trigger, detach or dump does it */
  prof_dead_sweep_locked();
  nlock_unlock(&prof_tdatas_lock);
}

/* ---- tdata -------------------------------------------------------------- */

/* A new tdata for this thread; `old` (expired by prof.reset) passes on its
 * uid, name and active flag, as jemalloc's tdata reinit does. */
static prof_tdata_t *tdata_create(tsd_t *tsd, prof_tdata_t *old) {
  /* A reused tdata (the last one freed) is zeroed up to its walk heads
   * and from their end up to PROF_TDATA_ZERO; of the heads (8 KB) only
   * `tctx`, which says a head is empty, is cleared: a head is read only
   * once its tctx is set, and the walk that sets it has written the rest
   * (prof_bt.c). The 9.2 KB memset was 1.51M of the 1.35M instructions
   * prof:true added to bench-threads -t 1 -s 0.015 (callgrind; rep stosb
   * counts a byte an instruction), more than all the rest. */
  bool reused;
  prof_tdata_t *td = prof_mem_alloc_head(sizeof *td, PM_TDATA,
                                         offsetof(prof_tdata_t, walks), &reused);
  if (td == NULL) return NULL;
  td->rec.in_tdata = true;
  /* a fresh one reads as zero: writing its heads faulted in their 8 KB */
  if (reused) {
    memset(td->walk_lru, 0, PROF_TDATA_ZERO - offsetof(prof_tdata_t, walk_lru));
    for (int i = 0; i < PROF_WALKS; i++) {
      td->walks[i].tctx = NULL;
      td->walks[i].word = NULL; /* walk_nrec is 0 again */
    }
  }
  td->prng = (uint64_t)(uintptr_t)tsd ^ nalloc_now_ns() ^
             ((uint64_t)getpid() << 32);
  (void)prof_prng_next(&td->prng);
  nlock_lock(&prof_tdatas_lock);
  td->lg = atomic_load_explicit(&prof_lg_sample, memory_order_relaxed);
  td->exact = td->lg == 0 && opt_lg_prof_interval < 0;
  td->pk_hi = 0; /* the first allocation asks prof_peak.c */
  td->node = (uint8_t)node_of_arena(tsd->arena);
  td->pk_lo = 0;
  if (old != NULL) {
    td->rec.uid = old->rec.uid;
    td->active = old->active;
    memcpy(td->rec.name, old->rec.name, sizeof td->rec.name);
    td->prng ^= old->prng;
    td->stk_lo = old->stk_lo;
    td->stk_hi = old->stk_hi;
  } else {
    td->rec.uid = next_thr_uid++;
    td->active = atomic_load_explicit(&prof_thread_active_init,
                                      memory_order_relaxed);
  }
  list_link(&prof_tdatas, &td->rec);
  atomic_fetch_add_explicit(&prof_ntdata_total, 1, memory_order_relaxed);
  if (old != NULL) tdata_retire_locked(old);
  if (dead_sweep_due()) prof_dead_sweep_locked();
  nlock_unlock(&prof_tdatas_lock);
  tsd->prof_tdata = td;
  return td;
}

prof_tdata_t *prof_tdata_get(tsd_t *tsd, bool create) {
  prof_tdata_t *td = tsd->prof_tdata;
  if (likely(td != NULL) &&
      likely(!(atomic_load_explicit(&td->attn, memory_order_relaxed) &
               PROF_ATTN_EXPIRED)))
    return td;
  if (!create || tsd->state != TSD_NOMINAL) return td;
  return tdata_create(tsd, td);
}

/* Thread exit: see tdata_retire_locked. */
void prof_tdata_detach(tsd_t *tsd) {
  prof_tdata_t *td = tsd->prof_tdata;
  if (td == NULL) return;
  tsd->prof_tdata = NULL;
  nlock_lock(&prof_tdatas_lock);
  tdata_retire_locked(td);
  if (dead_sweep_due()) prof_dead_sweep_locked();
  nlock_unlock(&prof_tdatas_lock);
}

void prof_tdata_moved(prof_tdata_t *td, unsigned node) {
  if (td->node == node) return;
  td->node = (uint8_t)node;
  td->last = NULL;
  for (int i = 0; i < PROF_WALKS; i++) td->walks[i].tctx = NULL;
}

/* The owner, after a dump: a tctx with nothing live and nothing allocated
 * since that dump (which wrote its counts) is freed; its counts stay in
 * the gctx. The table is rebuilt without it, and the walk cache and
 * `last` forget it. */
void prof_tdata_sweep(prof_tdata_t *td) {
  atomic_fetch_and_explicit(&td->attn, (uint8_t)~PROF_ATTN_SWEEP,
                            memory_order_relaxed);
  nlock_lock(&prof_tdatas_lock);
  bool fold = !atomic_load_explicit(&td->rec.expired, memory_order_relaxed);
  size_t freed = 0, left = 0;
  prof_tctx_t *t = atomic_load_explicit(&td->rec.tctxs, memory_order_relaxed);
  prof_tctx_t *keep = NULL, **tail = &keep;
  while (t) {
    prof_tctx_t *nx = t->next;
    if (atomic_load_explicit(&prof_tctx_cnt(t, PC_ALLOC)[C_OBJS],
                             memory_order_relaxed) ==
            t->dumped &&
        tctx_idle(t)) {
      if (td->last == t) td->last = NULL;
      for (int i = 0; i < PROF_WALKS; i++)
        if (td->walks[i].tctx == t) td->walks[i].tctx = NULL;
      tctx_free(t, fold);
      freed++;
    } else {
      *tail = t;
      tail = &t->next;
      left++;
    }
    t = nx;
  }
  *tail = NULL;
  atomic_store_explicit(&td->rec.tctxs, keep, memory_order_release);
  atomic_store_explicit(&td->rec.ntctx, left, memory_order_relaxed);
  if (freed > 0) {
    size_t cap = 64;
    while (!tab_fits(left + 1, cap)) cap *= 2;
    tab_rebuild(td, cap);
  }
  nlock_unlock(&prof_tdatas_lock);
}

/* prof.reset: new rate, every record expired (left out of dumps from now
 * on; each thread replaces its tdata on its next sample), and the
 * cumulative counts kept in the gctxs forgotten. Objects sampled before
 * the reset are still subtracted from their old tctx when freed. */
void prof_reset(unsigned lg) {
  nlock_lock(&prof_dump_lock);
  nlock_lock(&prof_tdatas_lock);
  atomic_store_explicit(&prof_lg_sample, lg, memory_order_relaxed);
  atomic_fetch_add_explicit(&prof_reset_gen, 1, memory_order_relaxed);
  for (prof_trec_t *r = prof_tdatas; r; r = r->next) {
    atomic_store_explicit(&r->expired, true, memory_order_relaxed);
    atomic_fetch_or_explicit(&((prof_tdata_t *)r)->attn, PROF_ATTN_EXPIRED,
                             memory_order_relaxed);
  }
  for (prof_trec_t *r = prof_dead; r; r = r->next)
    atomic_store_explicit(&r->expired, true, memory_order_relaxed);
  prof_dead_sweep_locked();
  for (prof_gctx_t *g = atomic_load_explicit(&prof_gctx_all,
                                             memory_order_acquire);
       g; g = g->next_all) {
    ret_free_all(g);
    g->ret_new = false;
    prof_gext_t *x = atomic_load_explicit(&g->ext, memory_order_acquire);
    if (x != NULL) /* kept: a free in flight may be adding to it */
      for (int i = 0; i < PROF_LIFE_N; i++)
        atomic_store_explicit(&x->life.n[i], 0, memory_order_relaxed);
  }
  prof_peak_reset();
  nlock_unlock(&prof_tdatas_lock);
  nlock_unlock(&prof_dump_lock);
}

/* In the child of fork() only the forking thread lives on: every other
 * thread's tdata now belongs to a thread that no longer exists, and is
 * retired as at thread exit. */
void prof_data_postfork_child(tsd_t *tsd) {
  prof_trec_t *r = prof_tdatas;
  while (r) {
    prof_trec_t *nx = r->next;
    if ((void *)r != tsd->prof_tdata) tdata_retire_locked((prof_tdata_t *)r);
    r = nx;
  }
}
