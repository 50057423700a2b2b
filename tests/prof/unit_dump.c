/* unit_dump.c -- the heap profile writer (prof/prof_dump.c, gperftools
 * text format, exact mode) against a model of the allocations the test
 * made: six call sites (dump_site0..5, distinct functions) allocate
 * objects of random sizes through nalloc_malloc, some are freed, and the
 * dump is parsed line by line:
 * - line 1: "heap profile: N: B [AN: AB] @ heapprofile", the totals equal
 *   to the sums over the record lines;
 * - each record: "n: b [an: ab] @ 0x.. 0x.." with one space around '@',
 *   lowercase 0x addresses, no count 0 with bytes; frame 0 a return address
 *   inside the site that called nalloc_malloc (dladdr), frame 1 inside its
 *   caller dump_drive (leaf first);
 * - per site, the lines whose frame 0 is in it add up to the model's live
 *   objects and requested bytes, and allocated objects and bytes since the
 *   start (the cumulative pair);
 * - the '#nalloc node' rows of issue 14's views, when written, add up per
 *   site to the same numbers; no record follows a view row;
 * - the trailer: an empty line, "MAPPED_LIBRARIES:", then maps lines, one
 *   of which is an executable mapping holding the sites' code.
 * Run with NALLOC_CONF=prof:true,lg_prof_sample:0,prof_active:false,
 * prof_unwind:fp (CMakeLists.txt); the test turns prof.active on around
 * its own allocations. Linked with libnalloc_np (the public API is all it
 * needs) and -rdynamic (so that dladdr names the sites). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nalloc.h"

#include "../check_core.h"

enum { NSITES = 6, MAXOBJ = 4000 };
typedef struct {
  unsigned long long n, b, an, ab;
} sum_t;
static sum_t truth[NSITES];

void *volatile dump_sink;
/* One function per site: the return address after the call is in it (the
 * store after the call keeps the call from being a tail call). */
#define SITE(k)                                                   \
  __attribute__((noinline)) void *dump_site##k(size_t n) {        \
    void *p = nalloc_malloc(n);                                   \
    dump_sink = p;                                                \
    __asm__ volatile("" ::: "memory");                            \
    return p;                                                     \
  }
SITE(0) SITE(1) SITE(2) SITE(3) SITE(4) SITE(5)
void *dump_site0(size_t), *dump_site1(size_t), *dump_site2(size_t), *dump_site3(size_t),
    *dump_site4(size_t), *dump_site5(size_t);
static void *(*const sites[NSITES])(size_t) = {dump_site0, dump_site1, dump_site2,
                                               dump_site3, dump_site4, dump_site5};

static struct {
  void *p;
  size_t size;
  int site;
} objs[MAXOBJ];
static size_t nobj;

/* Allocations from every site (sizes from 1 byte to large blocks), then
 * frees of about a third. */
__attribute__((noinline)) void dump_drive(void) {
  for (int i = 0; i < 3000; i++) {
    int s = (int)(check_rnd() % NSITES);
    uint64_t r = check_rnd();
    size_t size = r % 50 == 0 ? 70000 + r % 300000 : 1 + r % (s == 0 ? 16 : 4096);
    void *p = sites[s](size);
    CHECKF(p != NULL, "nalloc_malloc(%zu)", size);
    objs[nobj].p = p;
    objs[nobj].size = size;
    objs[nobj++].site = s;
    truth[s].n++, truth[s].b += size, truth[s].an++, truth[s].ab += size;
  }
  __asm__ volatile("" ::: "memory");
}

static void free_some(void) {
  for (size_t i = 0; i < nobj;)
    if (check_rnd() % 3 == 0) {
      truth[objs[i].site].n--;
      truth[objs[i].site].b -= objs[i].size;
      nalloc_free(objs[i].p);
      objs[i] = objs[--nobj];
    } else {
      i++;
    }
}

/* Which site (0..5) holds code address pc, -1 if none; dladdr names it
 * (the executable exports its symbols). */
static int site_of(uintptr_t pc, const char **name) {
  Dl_info di;
  *name = "?";
  if (dladdr((void *)(pc - 1), &di) == 0 || di.dli_sname == NULL) return -1;
  *name = di.dli_sname;
  if (strncmp(di.dli_sname, "dump_site", 9) == 0 && di.dli_sname[9] >= '0' &&
      di.dli_sname[9] < '0' + NSITES && di.dli_sname[10] == '\0')
    return di.dli_sname[9] - '0';
  return -1;
}

static void check_dump(const char *path, const char *when) {
  FILE *f = fopen(path, "r");
  CHECKF(f != NULL, "%s: no dump at %s", when, path);
  static char line[1 << 16];
  CHECKF(fgets(line, sizeof line, f) != NULL, "%s: empty dump", when);
  unsigned long long H[4];
  char label[64];
  int used = 0;
  CHECKF(sscanf(line, "heap profile: %llu: %llu [%llu: %llu] @ %63s%n", &H[0], &H[1], &H[2],
                &H[3], label, &used) == 5 &&
             line[used] == '\n',
         "%s: header \"%s\"", when, line);
  CHECKF(strcmp(label, "heapprofile") == 0, "%s: label %s in exact mode", when, label);
  sum_t all = {0, 0, 0, 0}, got[NSITES];
  memset(got, 0, sizeof got);
  sum_t gotnode[NSITES];
  memset(gotnode, 0, sizeof gotnode);
  int nrec = 0;
  bool seen_view = false, any_node = false;
  for (;;) {
    CHECKF(fgets(line, sizeof line, f) != NULL, "%s: the dump ends before its trailer", when);
    if (strcmp(line, "\n") == 0) break;
    /* the views of issue 14 follow the records: a stack's rows per NUMA
     * node must add up to the model like its main row; the temporary and
     * lifetime rows are other tests' business */
    char *rec = line;
    bool node = strncmp(line, "#nalloc node ", 13) == 0;
    if (node) {
      rec = strchr(line + 13, ' ');
      CHECKF(rec != NULL, "%s: node row \"%s\"", when, line);
      rec++;
    } else if (strncmp(line, "#nalloc temporary ", 18) == 0 ||
               strncmp(line, "#nalloc lifetime", 16) == 0) {
      CHECKF(strstr(line, " @ 0x") != NULL, "%s: view row \"%s\"", when, line);
      continue;
    } else {
      CHECKF(!seen_view, "%s: a record after the views: \"%s\"", when, line);
    }
    seen_view |= line[0] == '#';
    unsigned long long n, b, an, ab;
    int at = 0;
    CHECKF(sscanf(rec, "%llu: %llu [%llu: %llu] @%n", &n, &b, &an, &ab, &at) == 4 && at > 0,
           "%s: record \"%s\"", when, line);
    at += (int)(rec - line);
    CHECKF(line[at - 2] == ' ' && line[at - 3] == ']' && line[at] == ' ' && line[at + 1] == '0',
           "%s: not one space each side of '@': \"%s\"", when, line);
    CHECKF(!(n == 0 && b != 0) && !(an == 0 && ab != 0) && an >= n && ab >= b,
           "%s: counts that the readers reject or that cannot be: \"%s\"", when, line);
    if (!node) {
      nrec++;
      all.n += n, all.b += b, all.an += an, all.ab += ab;
    }
    /* the frames: lowercase hex after 0x, one space apart */
    uintptr_t fr[2] = {0, 0};
    int nf = 0;
    for (char *p = line + at; *p == ' ';) {
      CHECKF(p[1] == '0' && p[2] == 'x', "%s: a frame without 0x in \"%s\"", when, line);
      char *e = p + 3;
      uintptr_t v = 0;
      for (; (*e >= '0' && *e <= '9') || (*e >= 'a' && *e <= 'f'); e++)
        v = v * 16 + (uintptr_t)(*e <= '9' ? *e - '0' : *e - 'a' + 10);
      CHECKF(e > p + 3 && (*e == ' ' || *e == '\n'), "%s: a frame not in lowercase hex: \"%s\"",
             when, line);
      if (nf < 2) fr[nf] = v;
      nf++;
      p = e;
    }
    CHECKF(nf >= 1, "%s: a record without frames", when);
    const char *name;
    int s = site_of(fr[0], &name);
    if (s < 0) continue; /* the process's other allocations (none expected) */
    const char *caller = "?";
    CHECKF(nf >= 2, "%s: a site's record has one frame", when);
    Dl_info di;
    if (dladdr((void *)(fr[1] - 1), &di) && di.dli_sname) caller = di.dli_sname;
    CHECKF(strcmp(caller, "dump_drive") == 0, "%s: frame 1 of %s's record is in %s", when, name,
           caller);
    sum_t *g = node ? &gotnode[s] : &got[s];
    any_node |= node;
    g->n += n, g->b += b, g->an += an, g->ab += ab;
  }
  CHECKF(all.n == H[0] && all.b == H[1] && all.an == H[2] && all.ab == H[3],
         "%s: header %llu: %llu [%llu: %llu], the records add up to %llu: %llu [%llu: %llu]",
         when, H[0], H[1], H[2], H[3], all.n, all.b, all.an, all.ab);
  for (int s = 0; s < NSITES; s++)
    CHECKF(got[s].n == truth[s].n && got[s].b == truth[s].b && got[s].an == truth[s].an &&
               got[s].ab == truth[s].ab,
           "%s: dump_site%d has %llu: %llu [%llu: %llu] in the dump, the test made %llu: %llu "
           "[%llu: %llu]", when, s, got[s].n, got[s].b, got[s].an, got[s].ab, truth[s].n,
           truth[s].b, truth[s].an, truth[s].ab);
  for (int s = 0; s < NSITES && any_node; s++)
    CHECKF(gotnode[s].n == truth[s].n && gotnode[s].b == truth[s].b &&
               gotnode[s].an == truth[s].an && gotnode[s].ab == truth[s].ab,
           "%s: dump_site%d's node rows add up to %llu: %llu [%llu: %llu], the test made "
           "%llu: %llu [%llu: %llu]", when, s, gotnode[s].n, gotnode[s].b, gotnode[s].an,
           gotnode[s].ab, truth[s].n, truth[s].b, truth[s].an, truth[s].ab);
  /* the trailer */
  CHECKF(fgets(line, sizeof line, f) && strcmp(line, "MAPPED_LIBRARIES:\n") == 0,
         "%s: \"%s\" after the records, not MAPPED_LIBRARIES:", when, line);
  bool code = false;
  int nmaps = 0;
  uintptr_t pc = (uintptr_t)(void *)dump_site3;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    char perms[8];
    CHECKF(sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3, "%s: maps line \"%s\"", when, line);
    nmaps++;
    if (lo <= pc && pc < hi && perms[2] == 'x') code = true;
  }
  CHECKF(nmaps > 0 && code, "%s: %d maps lines, none maps the sites' code", when, nmaps);
  fclose(f);
  printf("%s: %d records, %llu: %llu [%llu: %llu]%s\n", when, nrec, H[0], H[1], H[2], H[3],
         any_node ? ", node rows" : "");
}

static void set_active(bool v) {
  CHECKF(nalloc_ctl("prof.active", NULL, NULL, &v, sizeof v) == 0, "prof.active");
}

int main(void) {
  check_rng = 0x5851f42d4c957f2dull;
  size_t lg = 1, sz = sizeof lg;
  CHECKF(nalloc_ctl("prof.lg_sample", &lg, &sz, NULL, 0) == 0 && lg == 0,
         "run with NALLOC_CONF=prof:true,lg_prof_sample:0,prof_active:false (lg %zu)", lg);
  char path[256];
  snprintf(path, sizeof path, "/tmp/prof_unit_dump.%d.heap", (int)getpid());
  const char *pp = path;
  set_active(true);
  dump_drive();
  set_active(false);
  CHECKF(nalloc_ctl("prof.dump", NULL, NULL, &pp, sizeof pp) == 0, "prof.dump");
  check_dump(path, "all live");
  free_some();
  CHECKF(nalloc_ctl("prof.dump", NULL, NULL, &pp, sizeof pp) == 0, "prof.dump");
  check_dump(path, "a third freed");
  while (nobj) {
    truth[objs[nobj - 1].site].n--;
    truth[objs[nobj - 1].site].b -= objs[nobj - 1].size;
    nalloc_free(objs[--nobj].p);
  }
  CHECKF(nalloc_ctl("prof.dump", NULL, NULL, &pp, sizeof pp) == 0, "prof.dump");
  check_dump(path, "all freed");
  unlink(path);
  printf("ok\n");
  return 0;
}
