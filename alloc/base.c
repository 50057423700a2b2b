/* base.c -- the metadata allocator: memory for nalloc's own structures
 * (spans, thread caches, arenas, profiler tables).
 *
 * It sits beside the user heap, never inside it, so metadata is never
 * profiled, never recursed into, and a user overrun cannot reach it by
 * walking off the end of a block. Blocks up to BASE_MAX come from 256 KiB
 * pieces carved by a bump pointer, with one free list per 16-byte size, so
 * freed blocks come back warm (a fresh page costs a fault); bigger blocks
 * are mapped directly. The bump pointer's pages are faulted in ahead of it,
 * a run at a time.
 *
 * The first piece is the library's own .bss (base_first), which the loader
 * maps with the library anyway: a process whose metadata fits in it (a
 * shell, a `cat`: a few KiB) makes no system call for metadata, and its
 * untouched pages cost nothing. */
#include "base.h"

#include "lock.h"
#include "os.h"

#include <string.h>

#define BASE_CHUNK ((size_t)256 << 10)
#define BASE_MAX ((size_t)64 << 10) /* thread caches (~30 KiB) stay recycled */
#define BASE_NLISTS (BASE_MAX / 16)
/* Pages are faulted in ahead of the bump pointer up to this many bytes at
 * a time (os_populate): metadata is always written, and one call for 16
 * pages costs less than two faults. The window grows with what the bump
 * pointer has handed out, so a short-lived process (a shell's `cat`) that
 * needs a few pages of metadata faults in those and no more; a window
 * under BASE_POPULATE_MIN is left to fault on touch: a process is only
 * populated ahead once it has used as much (a `cat` uses a few KiB, and
 * a madvise for four pages it may never touch cost it a system call). */
#define BASE_POPULATE ((size_t)64 << 10)
#define BASE_POPULATE_MIN ((size_t)16 * PAGE)

typedef struct base_free_s {
  struct base_free_s *next;
} base_free_t;

static nlock_t base_lock = NLOCK_INITIALIZER(LOCK_BASE);
static char *base_cur, *base_end;
static char *base_ready; /* the chunk is populated up to here */
NALLOC_BIG_BSS static base_free_t *base_lists[BASE_NLISTS + 1];
static _Atomic size_t base_mapped;
static size_t base_bumped; /* bytes the bump pointer handed out, ever */
NALLOC_BIG_BSS static char base_first[BASE_CHUNK] __attribute__((aligned(PAGE)));
static bool base_first_used;

/* Blocks whose size is a multiple of the cache line start on one: then a
 * structure that one thread writes all the time (a profiler counter set,
 * a thread cache) never shares a line with another thread's, and its
 * updates do not bounce between cores. The gap this leaves goes on the free
 * list of its size. Freed blocks keep their alignment, so a recycled block
 * of such a size is aligned too. */
void *base_alloc(size_t size) {
  size = ALIGN_UP(size ? size : 1, 16);
  if (size > BASE_MAX) {
    size = ALIGN_UP(size, PAGE);
    void *p = os_map(size);
    if (p) atomic_fetch_add_explicit(&base_mapped, size, memory_order_relaxed);
    return p;
  }
  size_t li = size / 16;
  nlock_lock(&base_lock);
  base_free_t *f = base_lists[li];
  if (f != NULL) {
    base_lists[li] = f->next;
    nlock_unlock(&base_lock);
    memset(f, 0, size);
    return f;
  }
  size_t gap = size % CACHELINE == 0 ? -(uintptr_t)base_cur % CACHELINE : 0;
  if ((size_t)(base_end - base_cur) < gap + size) {
    char *p = base_first; /* page aligned: no gap */
    if (base_first_used) p = os_map(BASE_CHUNK);
    base_first_used = true;
    if (p == NULL) {
      nlock_unlock(&base_lock);
      return NULL;
    }
    atomic_fetch_add_explicit(&base_mapped, BASE_CHUNK, memory_order_relaxed);
    base_cur = base_ready = p;
    base_end = p + BASE_CHUNK;
    gap = 0;
  }
  if (gap != 0) {
    f = (base_free_t *)base_cur;
    f->next = base_lists[gap / 16];
    base_lists[gap / 16] = f;
    base_cur += gap;
  }
  char *r = base_cur, *from = NULL, *to = NULL;
  base_cur += size;
  base_bumped += size;
  if (base_cur > base_ready) {
    size_t ahead = base_bumped < BASE_POPULATE ? base_bumped : BASE_POPULATE;
    from = base_ready;
    to = (char *)ALIGN_UP((uintptr_t)base_cur + ahead, PAGE);
    if (to > base_end) to = base_end;
    base_ready = to;
    if ((size_t)(to - from) < BASE_POPULATE_MIN) from = NULL;
  }
  nlock_unlock(&base_lock);
  /* outside the lock: another thread that uses these pages meanwhile
   * just faults them in itself */
  if (from != NULL) os_populate(from, (size_t)(to - from));
  return r; /* fresh mmap memory is already zero */
}

void base_free(void *p, size_t size) {
  if (p == NULL) return;
  size = ALIGN_UP(size ? size : 1, 16);
  if (size > BASE_MAX) {
    size = ALIGN_UP(size, PAGE);
    os_unmap(p, size);
    atomic_fetch_sub_explicit(&base_mapped, size, memory_order_relaxed);
    return;
  }
  base_free_t *f = p;
  nlock_lock(&base_lock);
  f->next = base_lists[size / 16];
  base_lists[size / 16] = f;
  nlock_unlock(&base_lock);
}

size_t base_stats_mapped(void) {
  return atomic_load_explicit(&base_mapped, memory_order_relaxed);
}

void base_prefork(void) { nlock_prefork(&base_lock); }
void base_postfork_parent(void) { nlock_postfork_parent(&base_lock); }
/* A fork that interrupted this thread inside base_alloc or base_free (from
 * a signal handler) leaves the bump pointer or a free list mid-update:
 * the child starts from a fresh chunk and empty lists (what they held is
 * lost to the child, which is all). */
void base_postfork_child(void) {
  if (!nlock_postfork_child(&base_lock)) return;
  base_cur = base_end = base_ready = NULL;
  for (size_t i = 0; i <= BASE_NLISTS; i++) base_lists[i] = NULL;
}
