/* bench/real/sizehist.c -- an LD_PRELOAD shim for bench/footprint.sh's
 * analysis: which request sizes a program makes and how much the
 * allocator under it rounds them up, at the moment the program's live
 * heap is largest.
 *
 *   cc -O2 -shared -fPIC -o sizehist.so bench/real/sizehist.c -ldl -lpthread
 *   LD_PRELOAD="./sizehist.so /path/to/libnalloc.so" SIZEHIST_OUT=h.txt prog
 *
 * It passes every call to the next allocator (RTLD_NEXT: the one preloaded
 * after it, or glibc), keeps each live block's requested size in a hash
 * table of its own (mmap'd, outside the heap), and tracks the live
 * requested bytes and the live usable bytes (malloc_usable_size of the
 * allocator under it). At the peak of the live requested bytes it takes a
 * snapshot of the live bytes per request size. At exit it writes to
 * SIZEHIST_OUT (default stderr): the peak, requested against usable, and
 * the request sizes holding the most bytes at the peak with what they
 * were rounded to. Every 4096 requests it also reads the process's RSS
 * (/proc/self/statm); at the highest RSS seen it records the live requested
 * and usable bytes and, when the allocator under it has a mallctl-style
 * interface (nalloc_ctl), its stats.allocated, active,
 * resident, mapped, metadata and dirty:
 * where the resident memory went at the RSS peak. Slow (one lock per
 * call); for analysis, not timing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void *(*n_malloc)(size_t);
static void (*n_free)(void *);
static void *(*n_calloc)(size_t, size_t);
static void *(*n_realloc)(void *, size_t);
static int (*n_memalign)(void **, size_t, size_t);
static void *(*n_aligned_alloc)(size_t, size_t);
static size_t (*n_usable)(void *);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
#define LG_TAB 24 /* 16M slots, 16 B each, touched as used (not counted in the RSS it reports) */
#define TAB (1ul << LG_TAB)
struct ent { uintptr_t p; uint64_t sz; /* requested << 20 | min(usable - requested, 2^20 - 1) */ };
static struct ent *tab;
#define NSIZES 65537 /* exact sizes up to 64 KiB, one bucket above */
static int64_t *live_by_size, *peak_by_size, *usable_by_size, *count_by_size;
static int64_t live_req, live_use, peak_req, peak_use, nreq;
static int64_t last_snap;
static char early[1 << 16];
static size_t early_used;
static __thread int inside;
typedef int (*ctl_fn)(const char *, void *, size_t *, void *, size_t);
static ctl_fn ctl;
static const char *ctl_name;
static int64_t rss_peak, rss_req, rss_use;
static const char *stat_names[] = {"stats.allocated", "stats.active", "stats.resident", "stats.mapped",
                                   "stats.metadata", "stats.dirty"};
#define NSTATS (sizeof stat_names / sizeof stat_names[0])
static int64_t rss_stats[NSTATS];
static int64_t lp_rss, lp_req, lp_use, lp_stats[NSTATS]; /* at the last live-peak snapshot */

static void init(void) {
  if (n_malloc) return;
  n_malloc = dlsym(RTLD_NEXT, "malloc");
  n_free = dlsym(RTLD_NEXT, "free");
  n_calloc = dlsym(RTLD_NEXT, "calloc");
  n_realloc = dlsym(RTLD_NEXT, "realloc");
  n_memalign = dlsym(RTLD_NEXT, "posix_memalign");
  n_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
  n_usable = dlsym(RTLD_NEXT, "malloc_usable_size");
  tab = mmap(NULL, TAB * sizeof(struct ent), PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  size_t a = NSIZES * sizeof(int64_t);
  char *m = mmap(NULL, 4 * a, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  live_by_size = (int64_t *)m;
  peak_by_size = (int64_t *)(m + a);
  usable_by_size = (int64_t *)(m + 2 * a);
  count_by_size = (int64_t *)(m + 3 * a);
  /* last: a failed dlsym allocates its error message */
  if ((ctl = (ctl_fn)dlsym(RTLD_NEXT, "nalloc_ctl"))) ctl_name = "nalloc_ctl";
}

static size_t h(uintptr_t p) { return (size_t)((p >> 4) * 0x9E3779B97F4A7C15ull >> (64 - LG_TAB)); }

static long page_size;
static pthread_mutex_t smu = PTHREAD_MUTEX_INITIALIZER;
static int64_t resident_of(void *a, size_t len) { /* bytes of [a, a+len) resident */
  static unsigned char vec[(TAB * sizeof(struct ent)) / 4096 + 1];
  size_t np = (len + page_size - 1) / page_size, n = 0;
  if (np > sizeof vec || mincore(a, len, vec)) return 0;
  for (size_t i = 0; i < np; i++) n += vec[i] & 1;
  return (int64_t)n * page_size;
}
static void rss_sample(int at_live_peak) { /* not under mu: the allocator's ctl may allocate */
  char buf[128];
  if (pthread_mutex_trylock(&smu)) return;
  int fd = open("/proc/self/statm", O_RDONLY);
  ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
  if (fd >= 0) close(fd);
  long size, res;
  if (n <= 0 || (buf[n] = 0, sscanf(buf, "%ld %ld", &size, &res) != 2)) { pthread_mutex_unlock(&smu); return; }
  if (!page_size) page_size = sysconf(_SC_PAGESIZE);
  /* the process's RSS less the shim's own table and histograms */
  int64_t rss = (int64_t)res * page_size - resident_of(tab, TAB * sizeof(struct ent)) -
                resident_of(live_by_size, 4 * NSIZES * sizeof(int64_t));
  int64_t *st = rss_stats;
  if (at_live_peak) {
    lp_rss = rss; lp_req = live_req; lp_use = live_use; st = lp_stats;
  } else {
    if (rss <= rss_peak) { pthread_mutex_unlock(&smu); return; }
    rss_peak = rss; rss_req = live_req; rss_use = live_use;
  }
  if (ctl) {
    uint64_t e = 1;
    size_t l = sizeof e;
    ctl("epoch", &e, &l, &e, sizeof e);
    for (size_t i = 0; i < NSTATS; i++) {
      size_t v = 0;
      l = sizeof v;
      st[i] = ctl(stat_names[i], &v, &l, NULL, 0) ? -1 : (int64_t)v;
    }
  }
  pthread_mutex_unlock(&smu);
}

static void add(void *p, size_t req) {
  if (!p || !count_by_size) return;
  size_t use = n_usable(p);
  size_t k = req < NSIZES - 1 ? req : NSIZES - 1;
  uint64_t w = use - req < (1u << 20) - 1 ? use - req : (1u << 20) - 1;
  pthread_mutex_lock(&mu);
  size_t i = h((uintptr_t)p);
  while (tab[i].p && tab[i].p != 1) i = (i + 1) & (TAB - 1);
  tab[i].p = (uintptr_t)p;
  tab[i].sz = (uint64_t)req << 20 | w;
  live_req += req; live_use += use; nreq++;
  int sample = (nreq & 0xfff) == 0, snap = 0;
  live_by_size[k] += req; count_by_size[k]++;
  usable_by_size[k] = use; /* last seen rounding of this size */
  if (live_req > peak_req) {
    peak_req = live_req; peak_use = live_use;
    /* a snapshot of the live bytes per size, at most every 1% of growth */
    if (peak_req > last_snap + last_snap / 100) {
      memcpy(peak_by_size, live_by_size, NSIZES * sizeof(int64_t));
      last_snap = peak_req;
      snap = 1;
    }
  }
  pthread_mutex_unlock(&mu);
  if (snap) rss_sample(1);
  if (sample) rss_sample(0);
}

static void del(void *p) {
  if (!p || !count_by_size) return;
  pthread_mutex_lock(&mu);
  size_t i = h((uintptr_t)p);
  while (tab[i].p && tab[i].p != (uintptr_t)p) i = (i + 1) & (TAB - 1);
  if (tab[i].p == (uintptr_t)p) {
    uint64_t req = tab[i].sz >> 20, w = tab[i].sz & ((1u << 20) - 1);
    size_t k = req < NSIZES - 1 ? req : NSIZES - 1;
    live_req -= req; live_use -= req + w; /* w saturates for huge blocks: close enough */
    live_by_size[k] -= req;
    tab[i].p = 1; /* tombstone */
  }
  pthread_mutex_unlock(&mu);
}

void *malloc(size_t n) {
  if (!n_malloc) {
    if (inside) { void *p = early + early_used; early_used += (n + 15) & ~15ul; return p; }
    inside = 1; init(); inside = 0;
  }
  void *p = n_malloc(n);
  add(p, n);
  return p;
}
void *calloc(size_t a, size_t b) {
  if (!n_calloc) {
    if (inside) { void *p = early + early_used; early_used += (a * b + 15) & ~15ul; return p; }
    inside = 1; init(); inside = 0;
  }
  void *p = n_calloc(a, b);
  add(p, a * b);
  return p;
}
void free(void *p) {
  if ((char *)p >= early && (char *)p < early + sizeof early) return;
  if (!n_free) init();
  del(p);
  n_free(p);
}
void *realloc(void *p, size_t n) {
  if (!n_realloc) init();
  if ((char *)p >= early && (char *)p < early + sizeof early) {
    void *q = malloc(n);
    if (q) memcpy(q, p, n);
    return q;
  }
  del(p);
  void *q = n_realloc(p, n);
  if (q) add(q, n);
  else if (p && n) add(p, n_usable(p));
  return q;
}
int posix_memalign(void **r, size_t a, size_t n) {
  if (!n_memalign) init();
  int e = n_memalign(r, a, n);
  if (!e) add(*r, n);
  return e;
}
void *aligned_alloc(size_t a, size_t n) {
  if (!n_aligned_alloc) init();
  void *p = n_aligned_alloc(a, n);
  add(p, n);
  return p;
}
void *memalign(size_t a, size_t n) {
  void *p;
  return posix_memalign(&p, a < sizeof(void *) ? sizeof(void *) : a, n) ? NULL : p;
}

struct row { size_t size; int64_t bytes; };
static int cmp(const void *a, const void *b) {
  const struct row *x = a, *y = b;
  return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

__attribute__((destructor)) static void report(void) {
  if (!tab) return;
  const char *o = getenv("SIZEHIST_OUT");
  FILE *f = o ? fopen(o, "a") : stderr;
  if (!f) return;
  fprintf(f, "pid %d: %lld requests; peak live requested %.1f MiB, usable at that moment %.1f MiB (%.3fx)\n",
          (int)getpid(), (long long)nreq, peak_req / 1048576.0, peak_use / 1048576.0,
          peak_req ? (double)peak_use / peak_req : 0);
  fprintf(f, "at the highest RSS seen (sampled every 4096 requests): RSS %.1f MiB, live requested %.1f MiB, usable %.1f MiB",
          rss_peak / 1048576.0, rss_req / 1048576.0, rss_use / 1048576.0);
  if (ctl)
    for (size_t i = 0; i < NSTATS; i++)
      if (rss_stats[i] >= 0) fprintf(f, ", %s %.1f MiB", stat_names[i], rss_stats[i] / 1048576.0);
  fprintf(f, "\nat the live peak (last snapshot): RSS %.1f MiB, live requested %.1f MiB, usable %.1f MiB",
          lp_rss / 1048576.0, lp_req / 1048576.0, lp_use / 1048576.0);
  if (ctl)
    for (size_t i = 0; i < NSTATS; i++)
      if (lp_stats[i] >= 0) fprintf(f, ", %s %.1f MiB", stat_names[i], lp_stats[i] / 1048576.0);
  fprintf(f, "\n");
  static struct row rows[NSIZES];
  int64_t tot = 0, totu = 0;
  size_t nr = 0;
  for (size_t k = 0; k < NSIZES; k++)
    if (peak_by_size[k] > 0) {
      rows[nr].size = k; rows[nr].bytes = peak_by_size[k]; nr++;
      tot += peak_by_size[k];
      if (k < NSIZES - 1 && k) totu += peak_by_size[k] / k * usable_by_size[k];
    }
  qsort(rows, nr, sizeof rows[0], cmp);
  fprintf(f, "at the peak snapshot: %.1f MiB requested in sizes <= 64 KiB and above; by request size:\n", tot / 1048576.0);
  fprintf(f, "  %8s %10s %7s %12s %8s %7s\n", "size", "live MiB", "share", "rounded to", "waste", "total requests");
  for (size_t i = 0; i < nr && i < 25; i++) {
    size_t k = rows[i].size;
    if (k == NSIZES - 1)
      fprintf(f, "  %8s %10.1f %6.1f%%\n", ">64KiB", rows[i].bytes / 1048576.0, 100.0 * rows[i].bytes / tot);
    else
      fprintf(f, "  %8zu %10.1f %6.1f%% %12lld %7.1f%% %lld\n", k, rows[i].bytes / 1048576.0,
              100.0 * rows[i].bytes / tot, (long long)usable_by_size[k],
              k ? 100.0 * ((double)usable_by_size[k] - k) / k : 0, (long long)count_by_size[k]);
  }
  if (o) fclose(f);
}
