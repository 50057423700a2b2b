/* fork_signal: fork() from a SIGPROF handler that interrupted the
 * allocator anywhere (issue 10, defect 3), and a child that then uses it.
 *
 * The main thread and a worker allocate and free over every path: small
 * blocks of many classes, bursts of one class whose frees empty spans,
 * large blocks (64 KiB - 8 MiB: the page heap carves and merges), aligned
 * blocks, realloc growth, calloc, thread.tcache.flush, blocks handed to
 * the other thread (remote frees both ways), short-lived threads (the heap
 * registry, abandoned spans and their adoption). A signaller thread sends
 * SIGPROF to the main thread or the worker at random short intervals, so
 * that the signal lands inside allocator code, wherever it is; the handler
 * forks. The child allocates and frees a varied set (small, large, aligned,
 * calloc, realloc, from a new thread too), frees blocks the parent made
 * before the stress (small blocks of both threads, large and aligned ones),
 * reads statistics, checks every content, and _exits 0. The parent, outside
 * the handler, reaps the children (the handler only records their pids)
 * and counts those that crashed, exited non-zero or hung (still running
 * FS_HANG_S seconds after the fork: killed). Every one is a failure.
 *
 *   fork_signal [alloc|prof|sites] [forks]   (forks: default 1000, or
 *                                  FORK_SIGNAL_FORKS; 60 under TSan/ASan)
 *
 * `prof` checks that the profiler is on (NALLOC_CONF=prof:true...), so that
 * the signal also interrupts its sampled paths and tables.
 *
 * `sites` is the deterministic form. Random signals rarely land inside
 * the short critical sections that matter most (a page heap growing, the
 * base allocator taking a new chunk, a page-map leaf, a profiler slab), but
 * each of those makes a system call with its lock held. This program
 * defines mmap, munmap, madvise and clock_gettime, which the allocator calls
 * through the PLT, and the signal is raised inside them: just before or
 * just after the real call, for the first two calls from every distinct
 * call stack (the allocator has frame pointers) and for every 50th other
 * call. No signaller thread then; the mode works with or without the
 * profiler (NALLOC_CONF). Set
 * FORK_SIGNAL_KEEP_HUNG=1 to leave hung children running for a debugger
 * (their pids are printed) instead of killing them. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define FS_HANG_S 10       /* a child still running this long after its fork hung */
#define FS_MAX_PENDING 24  /* children not yet reaped before the signaller waits */
/* Contents are written and checked over the first FS_FILL bytes of a
 * block: whole multi-megabyte blocks would cost more than the fork. */
#define FS_FILL(n) ((n) < 4096 ? (n) : (size_t)4096)

/* ---- time ---------------------------------------------------------------- */
static uint64_t fs_now_ns(void) { /* async-signal-safe; not our wrapper */
  struct timespec ts;
  syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- blocks the parent makes before the stress and never touches again:
 * the children check and free them (frees into the interrupted thread's
 * spans, another thread's spans, and the page heap of their arena). */
enum { FS_STABLE = 48 };
typedef struct {
  void *p;
  size_t size;
  uint64_t tag;
} fs_block_t;
static fs_block_t fs_stable[FS_STABLE];

/* ---- the children's records, written by the handler ---------------------- */
typedef struct {
  _Atomic pid_t pid; /* 0 until the handler stored it */
  uint64_t t0;       /* when it was forked */
  bool done;         /* main thread only: reaped */
} fs_child_t;
static fs_child_t *fs_children;
static int fs_nmax;                  /* forks asked for */
static atomic_int fs_nforked;        /* records taken */
static atomic_int fs_handled;        /* handler runs finished */
static atomic_int fs_fork_errors;    /* fork() itself failed */
static atomic_int fs_pending;        /* forked, not yet reaped */
static atomic_bool fs_stop;          /* workers end */
static bool fs_threads_ok = true;    /* new threads allowed (not TSan/ASan) */
static int fs_crashed, fs_exit_bad, fs_hung;

/* ---- what a child does ----------------------------------------------------- */

static void *fs_child_thread(void *arg) {
  void **from_parent_thread = arg; /* blocks of the child's first thread */
  rng_t r;
  rng_seed(&r, (uint64_t)getpid());
  for (int round = 0; round < 4; round++) {
    void *v[64];
    size_t sz[64];
    for (int i = 0; i < 64; i++) {
      sz[i] = (size_t)rng_range(&r, 1, i % 8 ? 2048 : 200 * KiB);
      v[i] = A_MALLOC(sz[i]);
      CHECK(v[i] != NULL);
      fill_fast(v[i], FS_FILL(sz[i]), (uint64_t)i * 7 + (uint64_t)round);
    }
    for (int i = 0; i < 64; i++) {
      CHECK(check_fast(v[i], FS_FILL(sz[i]), (uint64_t)i * 7 + (uint64_t)round));
      A_FREE(v[i]);
    }
  }
  for (int i = 0; i < 16; i++) A_FREE(from_parent_thread[i]); /* remote frees */
  return NULL;
}

/* Allocates and frees a varied set, checks contents, frees the parent's
 * stable blocks. Returns normally only if all went well. */
static void fs_child_body(void) {
  rng_t r;
  rng_seed(&r, (uint64_t)getpid() * 31);
  enum { N = 160 };
  void *v[N];
  size_t sz[N];
  for (int i = 0; i < N; i++) {
    unsigned k = (unsigned)rng_range(&r, 0, 15);
    if (k < 10) sz[i] = (size_t)rng_range(&r, 1, 1024);
    else if (k < 13) sz[i] = (size_t)rng_range(&r, 1025, 64 * KiB);
    else sz[i] = (size_t)rng_range(&r, 64 * KiB, 3 * MiB);
    if (k == 15) {
      size_t al = (size_t)1 << rng_range(&r, 4, 21);
      CHECK(A_POSIX_MEMALIGN(&v[i], al, sz[i]) == 0);
      CHECK(((uintptr_t)v[i] & (al - 1)) == 0);
    } else if (k == 9) {
      v[i] = A_CALLOC(1, sz[i]);
      CHECK(v[i] != NULL);
      const unsigned char *c = v[i];
      for (size_t j = 0; j < sz[i]; j += 509) CHECK(c[j] == 0);
    } else {
      v[i] = A_MALLOC(sz[i]);
    }
    CHECK(v[i] != NULL);
    fill_fast(v[i], FS_FILL(sz[i]), (uint64_t)i);
  }
  /* realloc growth, from small through large */
  void *g = NULL;
  size_t gs = 0;
  for (size_t s = 8; s <= 2 * MiB; s = s * 3 / 2 + 8) {
    void *n = A_REALLOC(g, s);
    CHECK(n != NULL);
    if (gs) CHECK(check_fast(n, FS_FILL(gs), 0xfeed));
    fill_fast(n, FS_FILL(s), 0xfeed);
    g = n;
    gs = s;
  }
  A_FREE(g);
  for (int i = 0; i < N; i += 2) {
    CHECK(check_fast(v[i], FS_FILL(sz[i]), (uint64_t)i));
    A_FREE(v[i]);
  }
  /* the parent's blocks: every one still holds what the parent wrote */
  for (int i = 0; i < FS_STABLE; i++) {
    CHECKF(check_fast(fs_stable[i].p, FS_FILL(fs_stable[i].size), fs_stable[i].tag),
           "child: stable block %d changed", i);
    if (i % 2 == 0) A_FREE(fs_stable[i].p);
  }
  if (fs_threads_ok) {
    void *mine[16];
    for (int i = 0; i < 16; i++) {
      mine[i] = A_MALLOC((size_t)16 << (i % 10));
      CHECK(mine[i] != NULL);
    }
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fs_child_thread, mine) == 0);
    CHECK(pthread_join(t, NULL) == 0);
  }
  tcache_flush();
  (void)stat_allocated(); /* statistics walk every arena */
  for (int i = 1; i < N; i += 2) {
    CHECK(check_fast(v[i], FS_FILL(sz[i]), (uint64_t)i));
    A_FREE(v[i]);
  }
  void *last = A_MALLOC(100);
  CHECK(last != NULL);
  A_FREE(last);
}

static volatile bool fs_in_child; /* this process is a child: no more forks */
static atomic_bool fs_forking;      /* sites mode: one fork at a time */

static void fs_on_sigprof(int sig) {
  (void)sig;
  int saved = errno;
  pid_t pid = fork();
  if (pid == 0) {
    fs_in_child = true;
    fs_child_body();
    _exit(0);
  }
  if (pid < 0) {
    atomic_fetch_add(&fs_fork_errors, 1);
  } else {
    int i = atomic_fetch_add(&fs_nforked, 1);
    fs_children[i].t0 = fs_now_ns();
    atomic_fetch_add(&fs_pending, 1);
    atomic_store(&fs_children[i].pid, pid);
  }
  atomic_fetch_add(&fs_handled, 1);
  atomic_store(&fs_forking, false);
  errno = saved;
}

/* ---- sites mode: the signal raised inside the allocator's system calls --- */

static atomic_bool fs_sites;           /* the wrappers may raise */
static _Atomic unsigned fs_site_calls; /* calls seen while armed */
static atomic_int fs_site_new;         /* distinct call stacks seen */
enum { FS_SITE_TAB = 4096 };
static _Atomic uint64_t fs_site_key[FS_SITE_TAB]; /* open addressing, 0 = free */
static _Atomic unsigned fs_site_hits[FS_SITE_TAB];

/* The call stack of the system call, as a key: the syscall's kind and
 * the return addresses of the wrapper's callers, five frames deep above
 * the wrapper (the allocator is built with frame pointers; a chain that
 * looks wrong ends the walk). */
static __attribute__((noinline)) uint64_t fs_site_of(unsigned kind) {
  uint64_t h = 0x9e3779b97f4a7c15ull * (kind + 1);
  uintptr_t *fp = __builtin_frame_address(0);
  for (int d = 0; d < 8 && fp != NULL; d++) {
    uintptr_t *up = (uintptr_t *)fp[0];
    if (d > 0) h = (h ^ fp[1]) * 0x100000001b3ull; /* d 0: this function */
    if (up <= fp || (uintptr_t)up - (uintptr_t)fp > ((uintptr_t)1 << 20) ||
        ((uintptr_t)up & 7))
      break;
    fp = up;
  }
  return h ? h : 1;
}

/* How many times this call stack was seen before (up to a few). */
static unsigned fs_site_seen(uint64_t key) {
  for (unsigned i = (unsigned)(key % FS_SITE_TAB), n = 0; n < FS_SITE_TAB;
       i = (i + 1) % FS_SITE_TAB, n++) {
    uint64_t k = atomic_load(&fs_site_key[i]), zero = 0;
    if (k == 0 && atomic_compare_exchange_strong(&fs_site_key[i], &zero, key)) {
      atomic_fetch_add(&fs_site_new, 1);
      k = key;
    } else if (k == 0) {
      k = atomic_load(&fs_site_key[i]);
    }
    if (k == key) return atomic_fetch_add(&fs_site_hits[i], 1);
  }
  return 99; /* table full: treat as old */
}

/* At a system call of kind `kind`, before (after = false) or after it: a
 * fork from the signal handler, now, in this thread, with whatever locks
 * the allocator holds here. */
static CHECK_UNUSED void fs_site(unsigned kind, bool after) {
  if (!atomic_load_explicit(&fs_sites, memory_order_relaxed) || fs_in_child) return;
  /* nalloc's decay thread blocks every signal: SIGPROF raised there would
   * stay pending, and fs_forking set for good (no handler to clear it) */
  sigset_t cur;
  if (pthread_sigmask(SIG_BLOCK, NULL, &cur) != 0 || sigismember(&cur, SIGPROF)) return;
  unsigned seen = fs_site_seen(fs_site_of(kind) + after);
  unsigned n = atomic_fetch_add(&fs_site_calls, 1);
  if (seen >= 1 && (n % 50 != 0 || atomic_load(&fs_pending) >= FS_MAX_PENDING))
    return;
  if (atomic_load(&fs_nforked) >= fs_nmax) return;
  bool idle = false;
  if (!atomic_compare_exchange_strong(&fs_forking, &idle, true)) return;
  raise(SIGPROF); /* runs the handler before it returns; it clears fs_forking */
}

enum { FS_MMAP, FS_MUNMAP, FS_MADVISE, FS_CLOCK };

/* Not under a sanitizer, whose runtime intercepts these itself. */
#define FS_SITES_OK (!CHECK_TSAN && !CHECK_ASAN)
#if FS_SITES_OK

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  fs_site(FS_MMAP, false);
  void *p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
  fs_site(FS_MMAP, true);
  return p;
}

int munmap(void *addr, size_t len) {
  fs_site(FS_MUNMAP, false);
  int r = (int)syscall(SYS_munmap, addr, len);
  fs_site(FS_MUNMAP, true);
  return r;
}

int madvise(void *addr, size_t len, int advice) {
  fs_site(FS_MADVISE, false);
  int r = (int)syscall(SYS_madvise, addr, len, advice);
  fs_site(FS_MADVISE, true);
  return r;
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
  fs_site(FS_CLOCK, false);
  int r = (int)syscall(SYS_clock_gettime, clk, ts);
  fs_site(FS_CLOCK, true);
  return r;
}
#endif

/* ---- the parent's watchdog -------------------------------------------------
 * A parent that stops making progress (a fork's prepare handler waiting
 * forever, say) is a failure too: said, and the children killed, instead
 * of waiting for ctest's timeout. Re-armed by the main loop. */
#define FS_PARENT_STALL_S 60

static void fs_on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "fork_signal: FAILED: the parent made no progress for "
                            "60 s (hung; children killed)\n";
  ssize_t w = write(2, msg, sizeof msg - 1);
  (void)w;
  int n = atomic_load(&fs_nforked);
  for (int i = 0; i < n; i++) {
    pid_t pid = atomic_load(&fs_children[i].pid);
    if (pid > 0 && !fs_children[i].done) kill(pid, SIGKILL);
  }
  _exit(2);
}

/* ---- reaping (main thread, outside the handler) ---------------------------- */

static const char *fs_keep_hung;

static void fs_reap(bool block) {
  for (;;) {
    int n = atomic_load(&fs_nforked);
    for (int i = 0; i < n; i++) {
      fs_child_t *c = &fs_children[i];
      pid_t pid = atomic_load(&c->pid);
      if (c->done || pid == 0) continue;
      int st;
      pid_t w = waitpid(pid, &st, WNOHANG);
      if (w == 0) {
        if (fs_now_ns() - c->t0 < (uint64_t)FS_HANG_S * 1000000000u) continue;
        fs_hung++;
        fprintf(stderr, "fork_signal: child %d hung (running %d s after fork)%s\n",
                (int)pid, FS_HANG_S, fs_keep_hung ? ", left running" : "");
        if (!fs_keep_hung) {
          kill(pid, SIGKILL);
          waitpid(pid, &st, 0);
        }
      } else if (w == pid) {
        if (WIFSIGNALED(st)) {
          fs_crashed++;
          fprintf(stderr, "fork_signal: child %d killed by signal %d\n", (int)pid,
                  WTERMSIG(st));
        } else if (WEXITSTATUS(st) != 0) {
          fs_exit_bad++;
          fprintf(stderr, "fork_signal: child %d exited %d\n", (int)pid,
                  WEXITSTATUS(st));
        }
      } else if (errno == EINTR) {
        continue; /* the handler forked meanwhile: look again */
      } else {
        CHECKF(false, "waitpid(%d): %s", (int)pid, strerror(errno));
      }
      c->done = true;
      atomic_fetch_sub(&fs_pending, 1);
    }
    if (!block || atomic_load(&fs_pending) == 0) return;
    usleep(2000);
  }
}

/* ---- the parent's workload ------------------------------------------------- */

/* Blocks handed between the main thread and the worker: a single-producer
 * single-consumer ring each way, so that each side frees the other's. */
enum { FS_RING = 256 };
typedef struct {
  _Atomic unsigned head, tail;
  fs_block_t b[FS_RING];
} fs_ring_t;
static fs_ring_t fs_to_worker, fs_to_main;

static bool fs_ring_put(fs_ring_t *q, fs_block_t b) {
  unsigned h = atomic_load_explicit(&q->head, memory_order_relaxed);
  if (h - atomic_load_explicit(&q->tail, memory_order_acquire) == FS_RING) return false;
  q->b[h % FS_RING] = b;
  atomic_store_explicit(&q->head, h + 1, memory_order_release);
  return true;
}

static bool fs_ring_get(fs_ring_t *q, fs_block_t *b) {
  unsigned t = atomic_load_explicit(&q->tail, memory_order_relaxed);
  if (t == atomic_load_explicit(&q->head, memory_order_acquire)) return false;
  *b = q->b[t % FS_RING];
  atomic_store_explicit(&q->tail, t + 1, memory_order_release);
  return true;
}

static void fs_free_checked(fs_block_t b) {
  CHECKF(check_fast(b.p, b.size < 256 ? b.size : 256, b.tag),
         "block %p (%zu bytes) changed", b.p, b.size);
  A_FREE(b.p);
}

static fs_block_t fs_new(rng_t *r, size_t lo, size_t hi) {
  fs_block_t b = {NULL, (size_t)rng_range(r, lo, hi), rng_next(r)};
  b.p = A_MALLOC(b.size);
  CHECK(b.p != NULL);
  fill_fast(b.p, b.size < 256 ? b.size : 256, b.tag);
  return b;
}

/* Frees through the ring it is given, else itself. */
static void fs_hand_or_free(fs_ring_t *q, fs_block_t b) {
  if (!fs_ring_put(q, b)) fs_free_checked(b);
}

static void fs_drain(fs_ring_t *q) {
  fs_block_t b;
  while (fs_ring_get(q, &b)) fs_free_checked(b);
}

/* A short-lived thread: allocates (a heap from the registry), frees some
 * of the main thread's blocks, leaves its own to the main thread (its spans
 * are abandoned at exit and adopted later). */
static void *fs_short_thread(void *arg) {
  fs_block_t *io = arg; /* [0..8) from main, freed here; [8..16) made here */
  rng_t r;
  rng_seed(&r, (uint64_t)(uintptr_t)arg);
  for (int i = 0; i < 8; i++) fs_free_checked(io[i]);
  for (int i = 8; i < 16; i++) io[i] = fs_new(&r, 1, 4096);
  for (int i = 0; i < 100; i++) {
    fs_block_t b = fs_new(&r, 1, 512);
    fs_free_checked(b);
  }
  return NULL;
}

/* New stacks for the profiler: a block allocated by one of 64 leaf
 * functions, d frames deep (d < 40, well inside prof_depth), makes 2,560
 * stacks per calling thread. Its tables keep growing while the signals
 * come: new records, the owner's table resized, the table of stacks
 * doubled past 2,048 entries (its old array unmapped with the lock held). */
typedef void *(*fs_leaf_fn)(size_t);
#define FS_LEAF(n)                                                    \
  static __attribute__((noinline)) void *fs_leaf##n(size_t s) {       \
    void *p = A_MALLOC(s);                                            \
    __asm__ volatile("" : : "r"(p) : "memory"); /* no tail call */    \
    return p;                                                         \
  }
#define FS_LEAF8(n) FS_LEAF(n##0) FS_LEAF(n##1) FS_LEAF(n##2) FS_LEAF(n##3) \
  FS_LEAF(n##4) FS_LEAF(n##5) FS_LEAF(n##6) FS_LEAF(n##7)
FS_LEAF8(1) FS_LEAF8(2) FS_LEAF8(3) FS_LEAF8(4)
FS_LEAF8(5) FS_LEAF8(6) FS_LEAF8(7) FS_LEAF8(8)
#define FS_LEAF8_PTR(n) fs_leaf##n##0, fs_leaf##n##1, fs_leaf##n##2, \
  fs_leaf##n##3, fs_leaf##n##4, fs_leaf##n##5, fs_leaf##n##6, fs_leaf##n##7
static const fs_leaf_fn fs_leaves[64] = {
    FS_LEAF8_PTR(1), FS_LEAF8_PTR(2), FS_LEAF8_PTR(3), FS_LEAF8_PTR(4),
    FS_LEAF8_PTR(5), FS_LEAF8_PTR(6), FS_LEAF8_PTR(7), FS_LEAF8_PTR(8)};

static __attribute__((noinline)) void *fs_deep(unsigned d, unsigned leaf, size_t s) {
  if (d == 0) return fs_leaves[leaf % 64](s);
  void *p = fs_deep(d - 1, leaf, s);
  __asm__ volatile("" : : "r"(p) : "memory"); /* no tail call: a frame each */
  return p;
}

/* One step of the mixed workload, over the thread's slot table. */
enum { FS_SLOTS = 512 };
typedef struct {
  rng_t r;
  fs_block_t slot[FS_SLOTS];
  fs_ring_t *out, *in;
  bool main;
} fs_worker_t;

static void fs_step(fs_worker_t *w) {
  rng_t *r = &w->r;
  unsigned op = (unsigned)rng_range(r, 0, 99);
  fs_drain(w->in);
  if (op < 50) { /* small blocks of many classes: replace a slot */
    unsigned i = (unsigned)rng_range(r, 0, FS_SLOTS - 1);
    if (w->slot[i].p) {
      if (op & 1) fs_hand_or_free(w->out, w->slot[i]);
      else fs_free_checked(w->slot[i]);
    }
    w->slot[i] = fs_new(r, 1, op < 40 ? 1024 : 64 * KiB);
  } else if (op < 62) { /* a burst of one class, freed: spans fill and empty */
    size_t s = (size_t)rng_range(r, 1, 8192);
    void *v[200];
    for (int i = 0; i < 200; i++) {
      v[i] = A_MALLOC(s);
      CHECK(v[i] != NULL);
      *(volatile char *)v[i] = 1;
    }
    for (int i = 0; i < 200; i++) A_FREE(v[i]);
  } else if (op < 72) { /* large: the page heap splits and merges */
    fs_block_t b = fs_new(r, 64 * KiB, op < 70 ? 1 * MiB : 8 * MiB);
    if (op & 1) fs_hand_or_free(w->out, b);
    else fs_free_checked(b);
  } else if (op < 80) { /* aligned */
    size_t al = (size_t)1 << rng_range(r, 5, op < 78 ? 13 : 21);
    size_t s = (size_t)rng_range(r, 1, 256 * KiB);
    void *p = NULL;
    if (op & 1) {
      CHECK(A_POSIX_MEMALIGN(&p, al, s) == 0);
    } else {
      p = A_ALIGNED_ALLOC(al, (s + al - 1) & ~(al - 1));
      CHECK(p != NULL);
    }
    CHECK(((uintptr_t)p & (al - 1)) == 0);
    memset(p, 0x5a, s < 128 ? s : 128);
    A_FREE(p);
  } else if (op < 88) { /* realloc growth, small to large */
    void *p = NULL;
    size_t lim = (size_t)rng_range(r, 256, 2 * MiB);
    for (size_t s = 16; s < lim; s = s * 2 - s / 3) {
      p = A_REALLOC(p, s);
      CHECK(p != NULL);
      ((char *)p)[s - 1] = 1;
    }
    A_FREE(p);
  } else if (op < 94) { /* calloc */
    size_t s = (size_t)rng_range(r, 1, op < 93 ? 4096 : 512 * KiB);
    unsigned char *p = A_CALLOC(1, s);
    CHECK(p != NULL && p[0] == 0 && p[s - 1] == 0 && p[s / 2] == 0);
    p[s / 2] = 1;
    A_FREE(p);
  } else if (op < 97) {
    tcache_flush();
  } else if (op < 99) { /* new stacks */
    for (int i = 0; i < 16; i++) {
      void *p = fs_deep((unsigned)rng_range(r, 0, 39), (unsigned)rng_range(r, 0, 63),
                        (size_t)rng_range(r, 1, 300));
      CHECK(p != NULL);
      A_FREE(p);
    }
  } else if (w->main && fs_threads_ok && op == 99) {
    fs_block_t io[16];
    for (int i = 0; i < 8; i++) io[i] = fs_new(r, 1, 2048);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fs_short_thread, io) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    for (int i = 8; i < 16; i++) fs_free_checked(io[i]);
  }
}

static void fs_free_all(fs_worker_t *w) {
  for (int i = 0; i < FS_SLOTS; i++)
    if (w->slot[i].p) {
      fs_free_checked(w->slot[i]);
      w->slot[i].p = NULL;
    }
}

static fs_worker_t fs_main_w, fs_worker_w;

static void *fs_worker(void *arg) {
  (void)arg;
  while (!atomic_load(&fs_stop)) fs_step(&fs_worker_w);
  fs_free_all(&fs_worker_w);
  return NULL;
}

/* Signals the main thread (mostly) or the worker at random short
 * intervals, one fork at a time, at most FS_MAX_PENDING children
 * unreaped. */
static pthread_t fs_main_tid, fs_worker_tid;

static void *fs_signaller(void *arg) {
  (void)arg;
  rng_t r;
  rng_seed(&r, 99);
  for (int i = 0; i < fs_nmax; i++) {
    while (atomic_load(&fs_pending) >= FS_MAX_PENDING) usleep(500);
    int before = atomic_load(&fs_handled);
    pthread_t to = rng_range(&r, 0, 3) ? fs_main_tid : fs_worker_tid;
    CHECK(pthread_kill(to, SIGPROF) == 0);
    while (atomic_load(&fs_handled) == before) sched_yield();
    struct timespec ts = {0, (long)rng_range(&r, 0, 3000) * 1000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static void fs_make_stable(void) {
  rng_t r;
  rng_seed(&r, 7);
  for (int i = 0; i < FS_STABLE; i++) {
    size_t s = i < 24 ? (size_t)rng_range(&r, 1, 2048)
               : i < 32 ? (size_t)rng_range(&r, 2049, 64 * KiB)
                        : (size_t)rng_range(&r, 64 * KiB, 4 * MiB);
    void *p;
    if (i % 8 == 7) CHECK(A_POSIX_MEMALIGN(&p, (size_t)1 << (5 + i % 12), s) == 0);
    else p = A_MALLOC(s);
    CHECK(p != NULL);
    fs_stable[i] = (fs_block_t){p, s, 0x5eed0000u + (uint64_t)i};
    fill_fast(p, FS_FILL(s), fs_stable[i].tag);
  }
}

/* Half the stable blocks come from another thread's heap: the child frees
 * them remotely into spans of a thread that is gone. */
static void *fs_stable_thread(void *arg) {
  (void)arg;
  fs_make_stable();
  return NULL;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "alloc";
  const char *env_forks = getenv("FORK_SIGNAL_FORKS");
  int nforks = argc > 2 ? atoi(argv[2]) : env_forks ? atoi(env_forks) : 1000;
  if (CHECK_TSAN || CHECK_ASAN) {
    /* TSan refuses threads in a threaded fork's child; ASan's allocator
     * (glibc's pthread_create allocates through it) is not fork-safe */
    fs_threads_ok = false;
    if (argc <= 2 && !env_forks) nforks = 60;
  }
  bool prof = false;
  size_t bsz = sizeof prof;
  int pr = nalloc_ctl("opt.prof", &prof, &bsz, NULL, 0);
  if (strcmp(mode, "prof") == 0) {
    CHECKF(pr == 0 && prof, "prof mode needs NALLOC_CONF=prof:true (opt.prof: %d %d)",
           pr, (int)prof);
  } else {
    CHECKF(strcmp(mode, "alloc") == 0 || strcmp(mode, "sites") == 0,
           "usage: fork_signal [alloc|prof|sites] [forks]");
  }
  bool sites = strcmp(mode, "sites") == 0;
  if (sites && !FS_SITES_OK) {
    fprintf(stderr, "fork_signal: sites mode needs a build without a sanitizer: skipped\n");
    return 77;
  }
  CHECK(nforks > 0);
  fs_keep_hung = getenv("FORK_SIGNAL_KEEP_HUNG");
  fs_nmax = nforks;
  /* sites: a raise already under way when the cap is reached still forks */
  fs_children = calloc((size_t)nforks + 64, sizeof *fs_children);
  CHECK(fs_children != NULL);

  pthread_t st;
  CHECK(pthread_create(&st, NULL, fs_stable_thread, NULL) == 0);
  CHECK(pthread_join(st, NULL) == 0);
  fs_block_t theirs[FS_STABLE / 2];
  memcpy(theirs, fs_stable + FS_STABLE / 2, sizeof theirs);
  fs_make_stable(); /* the main thread's own in the first half */
  memcpy(fs_stable + FS_STABLE / 2, theirs, sizeof theirs);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fs_on_sigprof;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGPROF, &sa, NULL) == 0);

  struct sigaction al;
  memset(&al, 0, sizeof al);
  al.sa_handler = fs_on_alarm;
  sigemptyset(&al.sa_mask);
  CHECK(sigaction(SIGALRM, &al, NULL) == 0);
  alarm(FS_PARENT_STALL_S);

  rng_seed(&fs_main_w.r, 1);
  rng_seed(&fs_worker_w.r, 2);
  fs_main_w.out = fs_worker_w.in = &fs_to_worker;
  fs_main_w.in = fs_worker_w.out = &fs_to_main;
  fs_main_w.main = true;
  fs_main_tid = pthread_self();
  CHECK(pthread_create(&fs_worker_tid, NULL, fs_worker, NULL) == 0);
  pthread_t sig;
  if (sites) atomic_store(&fs_sites, true);
  else CHECK(pthread_create(&sig, NULL, fs_signaller, NULL) == 0);

  uint64_t t0 = fs_now_ns();
  unsigned long steps = 0;
  /* sites: until the forks are done or the workload stops finding call
   * stacks it has not forked at (then the rest would all be repeats) */
  uint64_t last_new_steps = 0;
  int last_new = 0;
  while (atomic_load(&fs_handled) < nforks) {
    fs_step(&fs_main_w);
    if (++steps % 32 == 0) {
      fs_reap(false);
      alarm(FS_PARENT_STALL_S);
    }
    if (sites && atomic_load(&fs_site_new) != last_new) {
      last_new = atomic_load(&fs_site_new);
      last_new_steps = steps;
    }
    if (sites && steps - last_new_steps > 200000) break;
  }
  atomic_store(&fs_sites, false);
  if (!sites) CHECK(pthread_join(sig, NULL) == 0);
  alarm(FS_PARENT_STALL_S);
  fs_reap(true); /* children are killed after FS_HANG_S: bounded */
  atomic_store(&fs_stop, true);
  CHECK(pthread_join(fs_worker_tid, NULL) == 0);
  fs_drain(&fs_to_main);
  fs_drain(&fs_to_worker);
  fs_free_all(&fs_main_w);
  for (int i = 0; i < FS_STABLE; i++) fs_free_checked(fs_stable[i]);

  alarm(0);
  int forked = atomic_load(&fs_nforked);
  fprintf(stderr,
          "fork_signal: %s: %d forks (%lu parent steps, %.1f s): %d crashed, "
          "%d exited non-zero, %d hung, %d fork errors\n",
          mode, forked, steps, (double)(fs_now_ns() - t0) / 1e9, fs_crashed,
          fs_exit_bad, fs_hung, atomic_load(&fs_fork_errors));
  if (sites) {
    fprintf(stderr, "fork_signal: sites: %d distinct call stacks, %u calls\n",
            atomic_load(&fs_site_new), atomic_load(&fs_site_calls));
    CHECK(atomic_load(&fs_site_new) > 0 && forked > 0);
  } else {
    CHECK(forked == nforks);
  }
  CHECK(fs_crashed == 0 && fs_exit_bad == 0 && fs_hung == 0);
  CHECK(atomic_load(&fs_fork_errors) == 0);
  free(fs_children);
  return 0;
}
