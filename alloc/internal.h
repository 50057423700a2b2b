/* internal.h -- what every part of nalloc shares: compiler helpers, the
 * per-thread state (tsd), fork-aware locks, the metadata allocator, messages,
 * and the table types behind NALLOC_CONF and nalloc_ctl.
 *
 * This is also the whole interface prof/ has to the allocator: prof/ includes
 * this header and nothing else from alloc/. Nothing here allocates with
 * malloc, so any of it may be used from inside malloc. */
#ifndef NALLOC_INTERNAL_H
#define NALLOC_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define NALLOC_EXPORT __attribute__((visibility("default")))
#define NALLOC_NOINLINE __attribute__((noinline))
/* For code that reads other frames' stack words (the unwinders): ASan
 * poisons red zones between a frame's locals, which a stack walk may read. */
#define NALLOC_NO_ASAN __attribute__((no_sanitize_address))
#define NALLOC_ALWAYS_INLINE inline __attribute__((always_inline))

#define LG_PAGE 12
#define PAGE ((size_t)1 << LG_PAGE)
#define CACHELINE 64
#define ALIGN_UP(x, a) (((x) + ((a)-1)) & ~((uintptr_t)(a)-1))

/* ---- per-thread state -------------------------------------------------- */

enum { TSD_UNINIT = 0, TSD_NOMINAL = 1, TSD_TEARDOWN = 2 };

struct tcache_s;
typedef struct tsd_s {
  struct tcache_s *tcache;  /* never NULL once nominal; see tcache.c */
  int64_t prof_countdown;   /* requested bytes left until the next sample */
  uint8_t state;            /* TSD_* */
  uint8_t reentrant;        /* >0: inside nalloc internals; never sample */
  uint16_t arena;           /* index of the arena this thread allocates from */
  uint32_t tid;             /* kernel thread id, 0 until first needed */
  void *prof_tdata;         /* owned by prof/ */
} tsd_t;

/* initial-exec keeps the fast path to one %fs-relative access, and is small
 * enough (tens of bytes) for dlopen's static-TLS surplus. */
extern __thread tsd_t nalloc_tsd __attribute__((tls_model("initial-exec")));
static inline tsd_t *tsd_get(void) { return &nalloc_tsd; }

/* ---- locks --------------------------------------------------------------
 * A futex lock whose word is the owner's thread id (plus a "waiters" bit),
 * set by the same compare-and-swap that takes the lock. So the fork
 * handlers can always tell a lock the forking thread itself holds (fork()
 * from a signal handler that interrupted nalloc) and skip it instead of
 * deadlocking; a mutex that records its owner after acquiring has a window
 * where it cannot. */
typedef struct nlock_s {
  _Atomic uint32_t word; /* 0: free; else owner tid | NLOCK_WAITERS */
  bool fork_skipped;
} nlock_t;

#define NLOCK_INITIALIZER {0, false}
#define NLOCK_WAITERS 0x80000000u

uint32_t nalloc_tid_slow(void);
static inline uint32_t nalloc_tid(void) {
  uint32_t t = tsd_get()->tid;
  return likely(t != 0) ? t : nalloc_tid_slow();
}

void nlock_init(nlock_t *l);
void nlock_lock_slow(nlock_t *l, uint32_t self);
void nlock_wake(nlock_t *l);
static inline void nlock_lock(nlock_t *l) {
  uint32_t self = nalloc_tid(), free_word = 0;
  if (likely(atomic_compare_exchange_strong_explicit(
          &l->word, &free_word, self, memory_order_acquire, memory_order_relaxed)))
    return;
  nlock_lock_slow(l, self);
}
static inline bool nlock_trylock(nlock_t *l) {
  uint32_t free_word = 0;
  return atomic_compare_exchange_strong_explicit(
      &l->word, &free_word, nalloc_tid(), memory_order_acquire, memory_order_relaxed);
}
static inline void nlock_unlock(nlock_t *l) {
  if (unlikely(atomic_exchange_explicit(&l->word, 0, memory_order_release) &
               NLOCK_WAITERS))
    nlock_wake(l);
}
static inline bool nlock_held_by_me(nlock_t *l) {
  return (atomic_load_explicit(&l->word, memory_order_relaxed) & ~NLOCK_WAITERS) ==
         nalloc_tid();
}
void nlock_prefork(nlock_t *l);
void nlock_postfork_parent(nlock_t *l);
void nlock_postfork_child(nlock_t *l);

/* ---- metadata allocator (base.c) ----------------------------------------
 * Zeroed, 16-byte aligned memory from mmap, for nalloc's own structures
 * (spans, thread caches, profiler tables). Never calls malloc; safe from
 * anywhere. Returns NULL when the OS refuses memory. */
void *base_alloc(size_t size);
void base_free(void *p, size_t size);
size_t base_stats_mapped(void);
void base_prefork(void);
void base_postfork_parent(void);
void base_postfork_child(void);

/* ---- OS memory (os.c) ---------------------------------------------------- */
void *os_map(size_t size);          /* NULL on failure, errno kept */
void os_unmap(void *p, size_t size);
void os_purge(void *p, size_t size); /* MADV_DONTNEED: pages read back as 0 */
void os_populate(void *p, size_t size); /* fault fresh pages in, in one call */
uint64_t nalloc_now_ns(void);       /* CLOCK_MONOTONIC */

/* ---- messages (util.c) ---------------------------------------------------
 * One line on stderr prefixed "<nalloc>: ", written with write(2). */
void nalloc_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void nalloc_fatal(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
/* From now on, messages go to a private duplicate of stderr. */
void nalloc_log_keep(void);

/* ---- NALLOC_CONF tables (conf.c) -----------------------------------------
 * Every option is one row; the parser, the error messages and the opt.*
 * ctl names all come from the rows, so a module adds an option by adding a
 * row. */
typedef enum {
  CONF_BOOL,     /* bool: true/false */
  CONF_UNSIGNED, /* unsigned, in [min, max] */
  CONF_SIZE,     /* size_t, in [min, max]; accepts k/m/g suffixes */
  CONF_SSIZE,    /* ssize_t, in [min, max] */
  CONF_STR,      /* char[strcap], any text without ',' */
  CONF_ENUM,     /* unsigned index into choices (NULL-terminated) */
  CONF_SIGNAL,   /* int signal number: 12, USR2 or SIGUSR2; 0 = off */
} conf_type_t;

typedef struct conf_entry_s {
  const char *name;
  conf_type_t type;
  void *ptr;
  int64_t min, max;
  const char *const *choices; /* CONF_ENUM */
  size_t strcap;              /* CONF_STR */
  const char *help;           /* one line for README/--help */
} conf_entry_t;

/* ---- nalloc_ctl tables (ctl.c) -------------------------------------------
 * A name may contain '#' components that match a decimal index; the
 * indices are passed to the handler in order. */
typedef int (*ctl_fn_t)(const size_t *idx, void *oldp, size_t *oldlenp,
                        void *newp, size_t newlen);
typedef struct ctl_entry_s {
  const char *name;
  ctl_fn_t fn;
} ctl_entry_t;

/* Handler helpers: copy a value out / in with jemalloc's size checks. */
int ctl_out(void *oldp, size_t *oldlenp, const void *v, size_t len);
int ctl_in(void *newp, size_t newlen, void *v, size_t len);
#define CTL_READONLY()                  \
  do {                                  \
    if (newp != NULL || newlen != 0)    \
      return EPERM;             \
  } while (0)

#endif
