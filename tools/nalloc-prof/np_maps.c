/* np_maps.c -- the MAPPED_LIBRARIES trailer: a copy of /proc/<pid>/maps.
 *
 * Both forms the pprof readers know are accepted: the full form
 * "start-end perms offset dev inode path" and the brief form
 * "start-end perms path" (no file offset; then we assume the mapping starts
 * at file offset 0, as Go pprof does). Only executable mappings matter for
 * symbolization: return addresses always point into code. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "np_profile.h"
#include "np_util.h"

/* Reads one hex number; returns chars consumed or 0. */
static size_t np_hex(const char *s, size_t n, uint64_t *out) {
  size_t i = 0;
  uint64_t v = 0;
  while (i < n && isxdigit((unsigned char)s[i])) {
    if (i >= 16) return 0; /* wider than 64 bits */
    int c = s[i];
    v = v * 16 + (uint64_t)(isdigit(c) ? c - '0' : (tolower(c) - 'a' + 10));
    i++;
  }
  *out = v;
  return i;
}

static size_t np_skip_ws(const char *s, size_t n, size_t i) {
  while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
  return i;
}

static size_t np_token_end(const char *s, size_t n, size_t i) {
  while (i < n && s[i] != ' ' && s[i] != '\t') i++;
  return i;
}

bool np_maps_parse_line(const char *s, size_t n, np_mapping *m) {
  memset(m, 0, sizeof *m);
  size_t i = np_skip_ws(s, n, 0), k;
  uint64_t start, end, off = 0;
  if (!(k = np_hex(s + i, n - i, &start))) return false;
  i += k;
  if (i >= n || s[i] != '-') return false;
  i++;
  if (!(k = np_hex(s + i, n - i, &end))) return false;
  i += k;
  if (end <= start) return false;
  i = np_skip_ws(s, n, i);
  size_t pe = np_token_end(s, n, i);
  if (pe - i != 4) return false; /* perms are always 4 chars: r-xp */
  bool exec = s[i + 2] == 'x';
  i = np_skip_ws(s, n, pe);
  /* Full form if the next three tokens look like offset, dev, inode. */
  size_t t1 = i, t1e = np_token_end(s, n, t1);
  size_t t2 = np_skip_ws(s, n, t1e), t2e = np_token_end(s, n, t2);
  size_t t3 = np_skip_ws(s, n, t2e), t3e = np_token_end(s, n, t3);
  bool inode = t3e > t3;
  for (size_t j = t3; j < t3e; j++)
    if (!isdigit((unsigned char)s[j])) inode = false;
  bool full = t1e > t1 && np_hex(s + t1, t1e - t1, &off) == t1e - t1 &&
              t2e > t2 && memchr(s + t2, ':', t2e - t2) && inode;
  if (full) {
    i = np_skip_ws(s, n, t3e);
    m->has_offset = true;
  } else {
    off = 0;
  }
  if (!exec) return false;
  size_t pend = n;
  while (pend > i && isspace((unsigned char)s[pend - 1])) pend--;
  m->start = start;
  m->end = end;
  m->offset = off;
  m->path = np_xstrndup(s + i, pend - i);
  return true;
}

const np_mapping *np_maps_find(const np_profile *p, uint64_t addr) {
  /* Profiles have at most a few hundred mappings: a linear scan is fine and
   * copes with unsorted or overlapping lines (the first match wins). */
  for (size_t i = 0; i < p->nmaps; i++)
    if (addr >= p->maps[i].start && addr < p->maps[i].end) return &p->maps[i];
  return NULL;
}
