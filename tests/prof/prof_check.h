/* prof_check.h -- helpers for the profiler tests: CHECK, nalloc_ctl
 * wrappers, and a strict parser of nalloc's gperftools-format dumps that
 * also validates them (the rules google-pprof and Go pprof impose:
 * reference §0). Frames are named with dladdr, so test programs are linked
 * with -rdynamic and built -O0 -fno-inline. */
#ifndef PROF_CHECK_H
#define PROF_CHECK_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <nalloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check_core.h"
#define CHECK_EQ_U(a, b)                                                  \
  do {                                                                    \
    unsigned long long a_ = (a), b_ = (b);                                \
    if (a_ != b_) {                                                       \
      fprintf(stderr, "%s:%d: %s == %llu, expected %s == %llu\n", __FILE__, \
              __LINE__, #a, a_, #b, b_);                                  \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

#define NOINL __attribute__((noinline))

/* Sanitizer builds link the nalloc_-prefixed library only. */
#ifdef NALLOC_TEST_PREFIXED
#define t_malloc nalloc_malloc
#define t_calloc nalloc_calloc
#define t_realloc nalloc_realloc
#define t_free nalloc_free
#define t_posix_memalign nalloc_posix_memalign
#else
#define t_malloc malloc
#define t_calloc calloc
#define t_realloc realloc
#define t_free free
#define t_posix_memalign posix_memalign
#endif

static inline int ctl_dump(const char *path) {
  return nalloc_ctl("prof.dump", NULL, NULL, &path, sizeof path);
}
static inline void ctl_bool(const char *name, bool v) {
  CHECK(nalloc_ctl(name, NULL, NULL, &v, sizeof v) == 0);
}

#define PC_MAXF 256
#define PC_LIFE_N 14
/* A record line, or one of the '#nalloc' lines of the views (issue 14):
 * node lines carry the four counters of one NUMA node, temporary lines the
 * count in `an`, lifetime lines their histogram. pc_sum reads PC_MAIN. */
enum { PC_MAIN, PC_NODE, PC_TEMP, PC_LIFE };
typedef struct {
  int kind, node;
  uint64_t n, b, an, ab;
  uint64_t life[PC_LIFE_N];
  int nf;
  uintptr_t f[PC_MAXF];
} pc_rec_t;

typedef struct {
  uint64_t n, b, an, ab;
  char label[64];
  uint64_t rate; /* 1 for heapprofile */
  int nrec;
  pc_rec_t *rec;
  int nx;       /* the '#nalloc' lines, kept apart from the records */
  pc_rec_t *x;
  bool maps;
} pc_prof_t;

static inline bool pc_num(const char **p, uint64_t *v) {
  const char *s = *p;
  while (*s == ' ') s++;
  if (*s < '0' || *s > '9') return false;
  uint64_t x = 0;
  while (*s >= '0' && *s <= '9') x = x * 10 + (uint64_t)(*s++ - '0');
  *v = x;
  *p = s;
  return true;
}

/* "n: b [an: ab]" with exactly ": " and " [" as our writer emits. */
static inline bool pc_counts(const char **p, uint64_t c[4]) {
  const char *s = *p;
  if (!pc_num(&s, &c[0]) || strncmp(s, ": ", 2)) return false;
  s += 2;
  if (!pc_num(&s, &c[1]) || strncmp(s, " [", 2)) return false;
  s += 2;
  if (!pc_num(&s, &c[2]) || strncmp(s, ": ", 2)) return false;
  s += 2;
  if (!pc_num(&s, &c[3]) || *s != ']') return false;
  *p = s + 1;
  return true;
}

/* Parses and validates; exits the test on any malformed line. */
static inline pc_prof_t pc_load(const char *path) {
  pc_prof_t P;
  memset(&P, 0, sizeof P);
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    exit(1);
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  int lineno = 0, cap_rec = 0, cap_x = 0;
  while ((len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    if (len && line[len - 1] == '\n') line[--len] = 0;
    if (P.maps) continue;
    const char *s = line;
    uint64_t c[4];
    if (lineno == 1) {
      CHECK(strncmp(s, "heap profile: ", 14) == 0);
      s += 14;
      CHECK(pc_counts(&s, c));
      P.n = c[0], P.b = c[1], P.an = c[2], P.ab = c[3];
      CHECK(strncmp(s, " @ ", 3) == 0);
      snprintf(P.label, sizeof P.label, "%s", s + 3);
      if (strcmp(P.label, "heapprofile") == 0) P.rate = 1;
      else CHECK(sscanf(P.label, "heap_v2/%" SCNu64, &P.rate) == 1);
      continue;
    }
    if (len == 0) continue;
    if (strcmp(s, "MAPPED_LIBRARIES:") == 0) {
      P.maps = true;
      continue;
    }
    int kind = PC_MAIN;
    uint64_t node = 0, life[PC_LIFE_N] = {0};
    bool ok = true;
    if (strncmp(s, "#nalloc node ", 13) == 0) {
      kind = PC_NODE;
      s += 13;
      ok = pc_num(&s, &node) && *s++ == ' ';
    } else if (strncmp(s, "#nalloc temporary ", 18) == 0) {
      kind = PC_TEMP;
      s += 18;
      ok = pc_num(&s, &c[2]);
      c[0] = c[1] = c[3] = 0;
    } else if (strncmp(s, "#nalloc lifetime", 16) == 0) {
      kind = PC_LIFE;
      s += 16;
      for (int k = 0; k < PC_LIFE_N && ok; k++)
        ok = *s++ == ' ' && pc_num(&s, &life[k]);
      c[0] = c[1] = c[2] = c[3] = 0;
    }
    if (!ok || (kind != PC_TEMP && kind != PC_LIFE && !pc_counts(&s, c)) ||
        strncmp(s, " @ 0x", 5) != 0) {
      fprintf(stderr, "%s:%d: malformed record: %s\n", path, lineno, line);
      exit(1);
    }
    /* Go rejects a count of 0 with bytes; never negative (no '-'). */
    CHECK(c[0] != 0 || c[1] == 0);
    CHECK(c[2] != 0 || c[3] == 0);
    pc_rec_t **arr = kind == PC_MAIN ? &P.rec : &P.x;
    int *nn = kind == PC_MAIN ? &P.nrec : &P.nx;
    int *cp = kind == PC_MAIN ? &cap_rec : &cap_x;
    if (*nn == *cp) {
      *cp = *cp ? *cp * 2 : 64;
      *arr = realloc(*arr, (size_t)*cp * sizeof **arr);
      CHECK(*arr);
    }
    pc_rec_t *r = &(*arr)[(*nn)++];
    r->kind = kind;
    r->node = (int)node;
    memcpy(r->life, life, sizeof life);
    r->n = c[0], r->b = c[1], r->an = c[2], r->ab = c[3];
    r->nf = 0;
    s += 2;
    while (*s) {
      CHECK(*s == ' ' && s[1] == '0' && s[2] == 'x');
      s += 3;
      uintptr_t a = 0;
      int digits = 0;
      for (;; s++, digits++) {
        if (*s >= '0' && *s <= '9') a = a * 16 + (uintptr_t)(*s - '0');
        else if (*s >= 'a' && *s <= 'f') a = a * 16 + (uintptr_t)(*s - 'a' + 10);
        else break;
      }
      CHECK(digits > 0 && (*s == ' ' || *s == 0));
      if (r->nf < PC_MAXF) r->f[r->nf++] = a;
    }
    CHECK(r->nf > 0);
  }
  free(line);
  fclose(f);
  CHECK(lineno > 0);
  CHECK(P.maps);
  return P;
}

static inline void pc_free(pc_prof_t *P) {
  free(P->rec);
  free(P->x);
}

/* Dumps a profile now (prof.dump) to "<tag>.<pid>.heap", reads it and
 * removes the file. */
static inline pc_prof_t pc_dump_load(const char *tag) {
  char path[256];
  snprintf(path, sizeof path, "%s.%d.heap", tag, (int)getpid());
  CHECK(ctl_dump(path) == 0);
  pc_prof_t P = pc_load(path);
  unlink(path);
  return P;
}

/* Lowest start address of `exe` in a maps listing (a file or /proc). */
static inline uintptr_t pc_exe_base(const char *maps, const char *exe) {
  FILE *f = fopen(maps, "r");
  CHECK(f);
  char line[4096];
  uintptr_t base = 0;
  bool in_maps = strncmp(maps, "/proc/", 6) == 0;
  while (fgets(line, sizeof line, f)) {
    if (!in_maps) {
      in_maps = strncmp(line, "MAPPED_LIBRARIES:", 17) == 0;
      continue;
    }
    char *nl = strchr(line, '\n');
    if (nl) *nl = 0;
    size_t ll = strlen(line), el = strlen(exe);
    if (ll < el || strcmp(line + ll - el, exe) != 0) continue;
    uintptr_t a = (uintptr_t)strtoull(line, NULL, 16);
    if (base == 0 || a < base) base = a;
  }
  fclose(f);
  return base;
}

/* A profile written by another process of this same executable (ASLR):
 * move its frames in the executable to where this process has it, so
 * that pc_fn can name them. */
static inline void pc_rebase(pc_prof_t *P, const char *heap_path) {
  char exe[1024];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  CHECK(n > 0);
  exe[n] = 0;
  uintptr_t theirs = pc_exe_base(heap_path, exe);
  uintptr_t ours = pc_exe_base("/proc/self/maps", exe);
  CHECK(theirs && ours);
  for (int i = 0; i < P->nrec + P->nx; i++) {
    pc_rec_t *r = i < P->nrec ? &P->rec[i] : &P->x[i - P->nrec];
    for (int k = 0; k < r->nf; k++) {
      uintptr_t a = r->f[k];
      if (a >= theirs && a < theirs + (64u << 20)) r->f[k] = a - theirs + ours;
    }
  }
}

/* Name of the function containing return address a (or "?"). */
static inline const char *pc_fn(uintptr_t a) {
  Dl_info di;
  if (a && dladdr((void *)(a - 1), &di) && di.dli_sname) return di.dli_sname;
  return "?";
}

/* Sum of records whose frame 0 is in function fn (and, if caller1 is not
 * NULL, whose frame 1 is in caller1). */
typedef struct {
  uint64_t n, b, an, ab;
  int nrec;
  double est_n, est_b; /* reader-side unbiased estimate (v2 formula) */
  uint64_t life[PC_LIFE_N]; /* PC_LIFE */
} pc_sum_t;

/* pc_sum over the lines of one kind (and node, for PC_NODE). */
static inline pc_sum_t pc_sum_kind(const pc_prof_t *P, int kind, int node,
                                   const char *fn, const char *caller1) {
  pc_sum_t S;
  memset(&S, 0, sizeof S);
  const pc_rec_t *arr = kind == PC_MAIN ? P->rec : P->x;
  int nn = kind == PC_MAIN ? P->nrec : P->nx;
  for (int i = 0; i < nn; i++) {
    const pc_rec_t *r = &arr[i];
    if (r->kind != kind || (kind == PC_NODE && r->node != node)) continue;
    if (strcmp(pc_fn(r->f[0]), fn) != 0) continue;
    if (caller1 && (r->nf < 2 || strcmp(pc_fn(r->f[1]), caller1) != 0)) continue;
    S.n += r->n, S.b += r->b, S.an += r->an, S.ab += r->ab;
    for (int k = 0; k < PC_LIFE_N; k++) S.life[k] += r->life[k];
    S.nrec++;
    double scale = 1;
    if (P->rate > 1 && r->n > 0)
      scale = 1 / (1 - exp(-((double)r->b / (double)r->n) / (double)P->rate));
    S.est_n += (double)r->n * scale;
    S.est_b += (double)r->b * scale;
  }
  return S;
}

static inline pc_sum_t pc_sum(const pc_prof_t *P, const char *fn,
                              const char *caller1) {
  return pc_sum_kind(P, PC_MAIN, 0, fn, caller1);
}

#endif
