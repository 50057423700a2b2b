// cxx_new: every C++ operator new / delete variant ends up in nalloc.
//
// Each mangled operator must resolve (dlsym + dladdr) to libnalloc; memory
// from each form must be nalloc's (stats.allocated grows, and
// nalloc_malloc_usable_size accepts it: nalloc aborts on foreign pointers);
// failure semantics: std::bad_alloc, nullptr for nothrow, new_handler loop.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <new>

#include "check.h"

static void expect_nalloc_symbol(const char *sym) {
  void *f = dlsym(RTLD_DEFAULT, sym);
  CHECKF(f != nullptr, "C++ operator %s is not exported", sym);
  Dl_info di;
  CHECKF(dladdr(f, &di) != 0 && di.dli_fname, "dladdr(%s)", sym);
  CHECKF(strstr(di.dli_fname, "libnalloc") != nullptr,
         "C++ operator %s resolves to %s, not libnalloc", sym, di.dli_fname);
}

static const char *const kOperators[] = {
    "_Znwm",                                // new(size_t)
    "_Znam",                                // new[](size_t)
    "_ZnwmRKSt9nothrow_t",                  // new(size_t, nothrow)
    "_ZnamRKSt9nothrow_t",                  // new[](size_t, nothrow)
    "_ZnwmSt11align_val_t",                 // new(size_t, align)
    "_ZnamSt11align_val_t",                 // new[](size_t, align)
    "_ZnwmSt11align_val_tRKSt9nothrow_t",   // new(size_t, align, nothrow)
    "_ZnamSt11align_val_tRKSt9nothrow_t",   // new[](size_t, align, nothrow)
    "_ZdlPv",                               // delete(void*)
    "_ZdaPv",                               // delete[](void*)
    "_ZdlPvm",                              // delete(void*, size_t)
    "_ZdaPvm",                              // delete[](void*, size_t)
    "_ZdlPvRKSt9nothrow_t",                 // delete(void*, nothrow)
    "_ZdaPvRKSt9nothrow_t",                 // delete[](void*, nothrow)
    "_ZdlPvSt11align_val_t",                // delete(void*, align)
    "_ZdaPvSt11align_val_t",                // delete[](void*, align)
    "_ZdlPvmSt11align_val_t",               // delete(void*, size_t, align)
    "_ZdaPvmSt11align_val_t",               // delete[](void*, size_t, align)
    "_ZdlPvSt11align_val_tRKSt9nothrow_t",  // delete(void*, align, nothrow)
    "_ZdaPvSt11align_val_tRKSt9nothrow_t",  // delete[](void*, align, nothrow)
};

static const size_t kBig = 4 << 20;

// Allocates kBig with `alloc`, checks it is nalloc memory, frees with `del`.
template <class A, class D>
static void served(const char *what, A alloc, D del, size_t align = 16) {
  size_t a0 = stat_allocated();
  void *p = alloc(kBig);
  CHECKF(p != nullptr, "%s returned nullptr", what);
  CHECKF(((uintptr_t)p & (align - 1)) == 0, "%s: %p not %zu-aligned", what, p,
         align);
  memset(p, 0x42, kBig);
  size_t a1 = stat_allocated();
  CHECKF(a1 >= a0 + kBig, "%s: stats.allocated grew by %zd, not from nalloc?",
         what, (ssize_t)(a1 - a0));
  CHECKF(nalloc_malloc_usable_size(p) >= kBig, "%s: usable size %zu", what,
         nalloc_malloc_usable_size(p));
  del(p);
  size_t a2 = stat_allocated();
  CHECKF(a2 + kBig <= a1, "%s: the matching delete did not free (%zu -> %zu)",
         what, a1, a2);
  // small objects too: usable size accepts them
  void *q = alloc(24);
  CHECKF(q && nalloc_malloc_usable_size(q) >= 24, "%s small", what);
  del(q);
}

static int g_handler_calls;
static int g_handler_limit;
static void counting_handler() {
  g_handler_calls++;
  if (g_handler_calls >= g_handler_limit) std::set_new_handler(nullptr);
}

struct alignas(256) Over {
  unsigned char b[256];
};

int main() {
  for (const char *s : kOperators) expect_nalloc_symbol(s);

  const std::align_val_t A64{64}, A4K{4096}, A1M{1 << 20};
  served("new", [](size_t n) { return ::operator new(n); },
         [](void *p) { ::operator delete(p); });
  served("new[]", [](size_t n) { return ::operator new[](n); },
         [](void *p) { ::operator delete[](p); });
  served("new nothrow", [](size_t n) { return ::operator new(n, std::nothrow); },
         [](void *p) { ::operator delete(p, std::nothrow); });
  served("new[] nothrow",
         [](size_t n) { return ::operator new[](n, std::nothrow); },
         [](void *p) { ::operator delete[](p, std::nothrow); });
  served("new / sized delete", [](size_t n) { return ::operator new(n); },
         [](void *p) { ::operator delete(p, kBig); });
  served("new[] / sized delete[]", [](size_t n) { return ::operator new[](n); },
         [](void *p) { ::operator delete[](p, kBig); });
  for (std::align_val_t al : {A64, A4K, A1M}) {
    size_t a = (size_t)al;
    served("aligned new", [al](size_t n) { return ::operator new(n, al); },
           [al](void *p) { ::operator delete(p, al); }, a);
    served("aligned new[]", [al](size_t n) { return ::operator new[](n, al); },
           [al](void *p) { ::operator delete[](p, al); }, a);
    served("aligned new / sized aligned delete",
           [al](size_t n) { return ::operator new(n, al); },
           [al](void *p) { ::operator delete(p, kBig, al); }, a);
    served("aligned new[] / sized aligned delete[]",
           [al](size_t n) { return ::operator new[](n, al); },
           [al](void *p) { ::operator delete[](p, kBig, al); }, a);
    served("aligned nothrow new",
           [al](size_t n) { return ::operator new(n, al, std::nothrow); },
           [al](void *p) { ::operator delete(p, al, std::nothrow); }, a);
    served("aligned nothrow new[]",
           [al](size_t n) { return ::operator new[](n, al, std::nothrow); },
           [al](void *p) { ::operator delete[](p, al, std::nothrow); }, a);
  }
  // new-expressions: the compiler picks the aligned/sized forms
  {
    size_t a0 = stat_allocated();
    Over *o = new Over[20000];  // ~5 MiB, over-aligned
    CHECK(((uintptr_t)o & 255) == 0);
    CHECK(stat_allocated() >= a0 + sizeof(Over) * 20000);
    delete[] o;
    Over *one = new Over;
    CHECK(((uintptr_t)one & 255) == 0);
    CHECK(nalloc_malloc_usable_size(one) >= sizeof(Over));
    delete one;
  }
  // all alignments up to 1 MiB
  for (size_t a = 1; a <= (1u << 20); a <<= 1) {
    void *p = ::operator new(100, std::align_val_t(a));
    CHECKF(((uintptr_t)p & (a - 1)) == 0, "new(100, align %zu) = %p", a, p);
    memset(p, 1, 100);
    ::operator delete(p, 100, std::align_val_t(a));
  }

  // failures
  volatile size_t huge = SIZE_MAX - 4096;
  static const size_t hs[] = {SIZE_MAX, SIZE_MAX - 4096, (size_t)1 << 62};
  for (size_t h : hs) {
    huge = h;
    bool thrown = false;
    try {
      void *p = ::operator new(huge);
      ::operator delete(p);
    } catch (const std::bad_alloc &) {
      thrown = true;
    }
    CHECKF(thrown, "operator new(%zu) did not throw bad_alloc", h);
    thrown = false;
    try {
      void *p = ::operator new[](huge);
      ::operator delete[](p);
    } catch (const std::bad_alloc &) {
      thrown = true;
    }
    CHECKF(thrown, "operator new[](%zu) did not throw bad_alloc", h);
    thrown = false;
    try {
      void *p = ::operator new(huge, A4K);
      ::operator delete(p, A4K);
    } catch (const std::bad_alloc &) {
      thrown = true;
    }
    CHECKF(thrown, "aligned operator new(%zu) did not throw bad_alloc", h);
    CHECK(::operator new(huge, std::nothrow) == nullptr);
    CHECK(::operator new[](huge, std::nothrow) == nullptr);
    CHECK(::operator new(huge, A64, std::nothrow) == nullptr);
    CHECK(::operator new[](huge, A64, std::nothrow) == nullptr);
  }

  // new_handler: called until it uninstalls itself, then bad_alloc
  huge = SIZE_MAX - 4096;
  struct Case {
    const char *what;
    int kind;
  } cases[] = {{"new", 0}, {"new[]", 1}, {"aligned new", 2},
               {"nothrow new", 3}, {"aligned nothrow new", 4}};
  for (const Case &c : cases) {
    g_handler_calls = 0;
    g_handler_limit = 3;
    std::set_new_handler(counting_handler);
    bool thrown = false;
    void *p = (void *)1;
    try {
      switch (c.kind) {
        case 0: p = ::operator new(huge); break;
        case 1: p = ::operator new[](huge); break;
        case 2: p = ::operator new(huge, A64); break;
        case 3: p = ::operator new(huge, std::nothrow); break;
        case 4: p = ::operator new(huge, A64, std::nothrow); break;
      }
    } catch (const std::bad_alloc &) {
      thrown = true;
    }
    CHECKF(g_handler_calls == 3,
           "%s: new_handler called %d times, want 3 (it removes itself on "
           "the 3rd call)", c.what, g_handler_calls);
    if (c.kind >= 3)
      CHECKF(!thrown && p == nullptr, "%s: want nullptr, no throw", c.what);
    else
      CHECKF(thrown, "%s: want std::bad_alloc after the handler gave up",
             c.what);
    CHECK(std::get_new_handler() == nullptr);
  }
  // a handler that frees a reserve lets the retry succeed: simulate by a
  // handler on a normal size, which must then never be called
  g_handler_calls = 0;
  g_handler_limit = 1;
  std::set_new_handler(counting_handler);
  void *ok = ::operator new(1000);
  CHECK(g_handler_calls == 0);
  ::operator delete(ok);
  std::set_new_handler(nullptr);

  std::printf("cxx_new: ok\n");
  return 0;
}
