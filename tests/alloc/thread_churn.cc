// thread_churn: thousands of short-lived threads. Each allocates and frees,
// some leave objects for later threads to free (frees of memory whose
// allocating thread is gone), some never allocate, some only free, some
// exit through pthread_exit; a C++ thread_local destructor and a pthread
// key destructor allocate and free during thread exit. Afterwards
// stats.allocated is back near its baseline (thread caches were flushed at
// exit, nothing leaked) and stats.active did not grow with the number of
// threads.
#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "check.h"

namespace {

constexpr int kLeftovers = 512;
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
struct Obj {
  void *p;
  size_t size;
  uint64_t tag;
};
Obj g_left[kLeftovers];
std::atomic<long> g_dtor_runs{0}, g_key_dtor_runs{0};

void put_leftover(rng_t *r, Obj o) {
  int k = (int)(rng_next(r) % kLeftovers);
  pthread_mutex_lock(&g_mu);
  Obj old = g_left[k];
  g_left[k] = o;
  pthread_mutex_unlock(&g_mu);
  if (old.p) {
    CHECKF(check_fast(old.p, old.size, old.tag),
           "object left by an exited thread was corrupted");
    A_FREE(old.p);
  }
}

// thread_local with a destructor that frees and allocates at thread exit
struct TlsBuf {
  void *buf = nullptr;
  size_t size = 0;
  uint64_t tag = 0;
  ~TlsBuf() {
    if (!buf) return;
    CHECKF(check_fast(buf, size, tag), "thread_local buffer corrupted");
    A_FREE(buf);
    // allocate during thread exit: one freed right away, one left behind
    void *t = A_MALLOC(777);
    CHECK(t != nullptr);
    memset(t, 1, 777);
    A_FREE(t);
    rng_t r;
    rng_seed(&r, tag);
    Obj o{A_MALLOC(300), 300, tag ^ 0x5555};
    CHECK(o.p != nullptr);
    fill_fast(o.p, o.size, o.tag);
    put_leftover(&r, o);
    g_dtor_runs++;
  }
};
thread_local TlsBuf tls_buf;

pthread_key_t g_key;
void key_dtor(void *v) {
  // runs after (or before) nalloc's own thread teardown: must still work
  Obj *o = static_cast<Obj *>(v);
  CHECKF(check_fast(o->p, o->size, o->tag), "key-held object corrupted");
  A_FREE(o->p);
  void *x = A_CALLOC(10, 100);
  CHECK(x != nullptr);
  A_FREE(x);
  A_FREE(o);
  g_key_dtor_runs++;
}

void exit_via_pthread_exit() { pthread_exit(nullptr); }

void *worker(void *arg) {
  uint64_t id = (uint64_t)(uintptr_t)arg;
  rng_t r;
  rng_seed(&r, id);
  switch (id % 8) {
    case 0:  // never allocates
      return nullptr;
    case 1: {  // first nalloc call is a free of someone else's object
      Obj o{};
      pthread_mutex_lock(&g_mu);
      for (int k = 0; k < kLeftovers && !o.p; k++)
        if (g_left[k].p) {
          o = g_left[k];
          g_left[k].p = nullptr;
        }
      pthread_mutex_unlock(&g_mu);
      if (o.p) {
        CHECK(check_fast(o.p, o.size, o.tag));
        A_FREE(o.p);
      }
      return nullptr;
    }
    default:
      break;
  }
  enum { M = 40 };
  void *v[M];
  size_t s[M];
  for (int i = 0; i < M; i++) {
    uint64_t c = rng_next(&r) % 100;
    s[i] = c < 80 ? (size_t)rng_range(&r, 1, 1024)
           : c < 98 ? (size_t)rng_range(&r, 1025, 32 * KiB)
                    : (size_t)rng_range(&r, 32 * KiB, 512 * KiB);
    v[i] = A_MALLOC(s[i]);
    CHECK(v[i] != nullptr);
    fill_fast(v[i], s[i], id * 100 + i);
  }
  for (int i = 0; i < M; i++) {
    CHECK(check_fast(v[i], s[i], id * 100 + i));
    if (i % 10 == 0) {
      put_leftover(&r, Obj{v[i], s[i], id * 100 + i});
    } else {
      A_FREE(v[i]);
    }
  }
  if (id % 8 == 2 || id % 8 == 3) {
    tls_buf.size = (size_t)rng_range(&r, 1, 5000);
    tls_buf.tag = id;
    tls_buf.buf = A_MALLOC(tls_buf.size);
    CHECK(tls_buf.buf != nullptr);
    fill_fast(tls_buf.buf, tls_buf.size, tls_buf.tag);
  }
  if (id % 8 == 4 || id % 8 == 3) {
    Obj *o = static_cast<Obj *>(A_MALLOC(sizeof(Obj)));
    CHECK(o != nullptr);
    o->size = 200;
    o->tag = id + 1;
    o->p = A_MALLOC(200);
    CHECK(o->p != nullptr);
    fill_fast(o->p, 200, o->tag);
    CHECK(pthread_setspecific(g_key, o) == 0);
  }
  if (id % 8 == 5) exit_via_pthread_exit();
  return nullptr;
}

size_t active() {
  ctl_refresh();
  return ctl_size("stats.active");
}

}  // namespace

int main() {
  CHECK(pthread_key_create(&g_key, key_dtor) == 0);
  const int kThreads = (int)ITERS(5000);
  const int kBatch = 16;
  std::fprintf(stderr, "thread_churn: %d threads, %s\n", kThreads, A_MODE);

  // warm up: the first batch sets up whatever is set up once (stack cache,
  // arenas, ...), then take the baseline
  auto run_batch = [&](int first, int n) {
    pthread_t t[kBatch];
    for (int i = 0; i < n; i++)
      CHECKF(pthread_create(&t[i], nullptr, worker,
                            (void *)(uintptr_t)(first + i)) == 0,
             "pthread_create #%d", first + i);
    for (int i = 0; i < n; i++) CHECK(pthread_join(t[i], nullptr) == 0);
  };
  for (int b = 0; b < 4; b++) run_batch(1000000 + b * kBatch, kBatch);
  tcache_flush();
  size_t base = stat_allocated();
  size_t base_active = active();

  for (int first = 0; first < kThreads; first += kBatch)
    run_batch(first, first + kBatch <= kThreads ? kBatch : kThreads - first);

  size_t mid = stat_allocated();
  // free everything left behind by threads that are gone
  for (int k = 0; k < kLeftovers; k++)
    if (g_left[k].p) {
      CHECK(check_fast(g_left[k].p, g_left[k].size, g_left[k].tag));
      A_FREE(g_left[k].p);
      g_left[k].p = nullptr;
    }
  tcache_flush();
  size_t end = stat_allocated();
  size_t end_active = active();
  std::fprintf(stderr,
               "thread_churn: allocated %zu -> %zu (with leftovers) -> %zu; "
               "active %zu -> %zu; tls dtors %ld key dtors %ld\n",
               base, mid, end, base_active, end_active, g_dtor_runs.load(),
               g_key_dtor_runs.load());
  CHECKF(g_dtor_runs.load() > kThreads / 8,
         "thread_local destructors ran %ld times", g_dtor_runs.load());
  CHECKF(g_key_dtor_runs.load() > kThreads / 8, "key destructors ran %ld",
         g_key_dtor_runs.load());
  // leftovers from the warm-up batches were freed too, so end may be below
  // base; a thread cache or an object lost per thread would show here
  CHECKF(end <= base + 1 * MiB,
         "stats.allocated %zu after the churn, %zu before: %zd bytes not "
         "returned by %d exited threads", end, base, (ssize_t)(end - base),
         kThreads);
  CHECKF(end_active <= base_active + 32 * MiB,
         "stats.active grew from %zu to %zu over %d short-lived threads",
         base_active, end_active, kThreads);
  std::printf("thread_churn: ok\n");
  return 0;
}
