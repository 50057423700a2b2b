/* np_util.c -- allocation, buffers, interning and messages for nalloc-prof.
 * See np_util.h. */
#include "np_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *np_progname = "nalloc-prof";

static void np_oom(void) {
  fprintf(stderr, "%s: out of memory\n", np_progname);
  exit(2);
}

void *np_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) np_oom();
  return p;
}

void *np_xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) np_oom();
  return p;
}

void *np_xrealloc(void *p, size_t n) {
  p = realloc(p, n ? n : 1);
  if (!p) np_oom();
  return p;
}

char *np_xstrdup(const char *s) { return np_xstrndup(s, strlen(s)); }

char *np_xstrndup(const char *s, size_t n) {
  char *p = np_xmalloc(n + 1);
  if (n > 0) memcpy(p, s, n); /* s may be NULL when n is 0 (an empty field) */
  p[n] = 0;
  return p;
}

char *np_xasprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  int r = vasprintf(&s, fmt, ap);
  va_end(ap);
  if (r < 0) np_oom();
  return s;
}

void np_grow(void **arr, size_t *cap, size_t need, size_t esz) {
  if (need <= *cap) return;
  size_t c = *cap ? *cap : 8;
  while (c < need) c *= 2;
  *arr = np_xrealloc(*arr, c * esz);
  *cap = c;
}

void np_warn(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: warning: ", np_progname);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

void np_buf_put(np_buf *b, const void *p, size_t n) {
  np_grow((void **)&b->data, &b->cap, b->len + n + 1, 1);
  memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = 0;
}

void np_buf_putc(np_buf *b, char c) { np_buf_put(b, &c, 1); }
void np_buf_puts(np_buf *b, const char *s) { np_buf_put(b, s, strlen(s)); }

void np_buf_printf(np_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char tmp[512];
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof tmp) {
    np_buf_put(b, tmp, (size_t)n);
    return;
  }
  np_grow((void **)&b->data, &b->cap, b->len + (size_t)n + 1, 1);
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void np_buf_put_xml(np_buf *b, const char *s) {
  for (; *s; s++) {
    switch (*s) {
    case '<': np_buf_puts(b, "&lt;"); break;
    case '>': np_buf_puts(b, "&gt;"); break;
    case '&': np_buf_puts(b, "&amp;"); break;
    case '"': np_buf_puts(b, "&quot;"); break;
    case '\'': np_buf_puts(b, "&#39;"); break;
    default:
      /* Control characters are not allowed in XML 1.0 text. */
      np_buf_putc(b, ((unsigned char)*s < 0x20) ? '?' : *s);
    }
  }
}

void np_buf_free(np_buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

uint64_t np_hash(const void *p, size_t n) {
  /* FNV-1a with a final mix: fast, and good enough for our table sizes. */
  const unsigned char *s = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

static void np_intern_rehash(np_intern *t) {
  size_t ns = t->nslots ? t->nslots * 2 : 64;
  uint32_t *slots = np_xcalloc(ns, sizeof *slots);
  for (size_t id = 0; id < t->n; id++) {
    size_t i = np_hash(t->keys[id], t->lens[id]) & (ns - 1);
    while (slots[i]) i = (i + 1) & (ns - 1);
    slots[i] = (uint32_t)id + 1;
  }
  free(t->slots);
  t->slots = slots;
  t->nslots = ns;
}

uint32_t np_intern_find(const np_intern *t, const void *key, size_t len) {
  if (!t->nslots) return UINT32_MAX;
  size_t i = np_hash(key, len) & (t->nslots - 1);
  for (; t->slots[i]; i = (i + 1) & (t->nslots - 1)) {
    uint32_t id = t->slots[i] - 1;
    if (t->lens[id] == len && memcmp(t->keys[id], key, len) == 0) return id;
  }
  return UINT32_MAX;
}

uint32_t np_intern_bytes(np_intern *t, const void *key, size_t len) {
  uint32_t id = np_intern_find(t, key, len);
  if (id != UINT32_MAX) return id;
  if ((t->n + 1) * 2 > t->nslots) np_intern_rehash(t);
  if (t->n >= t->cap) {
    size_t c = t->cap;
    np_grow((void **)&t->keys, &c, t->n + 1, sizeof *t->keys);
    t->lens = np_xrealloc(t->lens, c * sizeof *t->lens);
    t->cap = c;
  }
  id = (uint32_t)t->n++;
  t->keys[id] = np_xstrndup(key, len);
  t->lens[id] = len;
  size_t i = np_hash(key, len) & (t->nslots - 1);
  while (t->slots[i]) i = (i + 1) & (t->nslots - 1);
  t->slots[i] = id + 1;
  return id;
}

uint32_t np_intern_str(np_intern *t, const char *s) {
  return np_intern_bytes(t, s, strlen(s));
}

void np_intern_free(np_intern *t) {
  for (size_t i = 0; i < t->n; i++) free(t->keys[i]);
  free(t->keys);
  free(t->lens);
  free(t->slots);
  memset(t, 0, sizeof *t);
}

int np_read_file(const char *path, char **data, size_t *len, char *err,
                 size_t errlen) {
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  np_buf b = {0};
  char tmp[65536];
  size_t n;
  while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) np_buf_put(&b, tmp, n);
  int bad = ferror(f);
  int e = errno;
  if (f != stdin) fclose(f);
  if (bad) {
    snprintf(err, errlen, "%s: read error: %s", path, strerror(e));
    np_buf_free(&b);
    return -1;
  }
  if (!b.data) np_buf_put(&b, "", 0);
  *data = b.data;
  *len = b.len;
  return 0;
}
