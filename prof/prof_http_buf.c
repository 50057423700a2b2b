/* prof_http_buf.c -- scratch memory for the profile server: byte buffers
 * and tables in mappings of their own (see ph_buf_t in prof_http.h).
 *
 * Why mmap and not base_alloc: a request's memory is large (a profile's
 * protobuf, a symbol table index), short-lived and freed as a whole;
 * base_alloc is built for small metadata that mostly lives forever. mremap
 * grows a buffer without copying. MADV_DONTFORK keeps fork children from
 * inheriting (and paying for) a request in flight. */
#define _GNU_SOURCE
#include "prof_http.h"

#include <string.h>
#include <sys/mman.h>

static size_t ph_round_pages(size_t n) {
  return (n + PAGE - 1) & ~(PAGE - 1);
}

void *ph_mem(size_t size) {
  if (size == 0) size = 1;
  size = ph_round_pages(size);
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  madvise(p, size, MADV_DONTFORK);
  return p;
}

void ph_mem_free(void *p, size_t size) {
  if (p != NULL) munmap(p, ph_round_pages(size ? size : 1));
}

bool ph_buf_reserve(ph_buf_t *b, size_t more) {
  if (b->err) return false;
  if (more <= b->cap - b->len) return true;
  if (more > ((size_t)1 << 40) - b->len) { /* nothing here is that big */
    b->err = true;
    return false;
  }
  size_t want = b->cap ? b->cap : 64 * 1024;
  while (want - b->len < more) want *= 2;
  void *p;
  if (b->p == NULL) {
    p = ph_mem(want);
  } else {
    p = mremap(b->p, b->cap, want, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) p = NULL;
  }
  if (p == NULL) {
    b->err = true;
    return false;
  }
  b->p = p;
  b->cap = want;
  return true;
}

void ph_buf_put(ph_buf_t *b, const void *s, size_t n) {
  if (n == 0 || !ph_buf_reserve(b, n)) return;
  memcpy(b->p + b->len, s, n);
  b->len += n;
}

void ph_buf_str(ph_buf_t *b, const char *s) { ph_buf_put(b, s, strlen(s)); }

void ph_buf_u64(ph_buf_t *b, uint64_t v) {
  char t[24];
  ph_buf_put(b, t, prof_fmt_u64(t, v));
}

void ph_buf_hex(ph_buf_t *b, uint64_t v) {
  char t[24];
  ph_buf_put(b, t, prof_fmt_hex(t, v));
}

void ph_buf_free(ph_buf_t *b) {
  if (b->p != NULL) munmap(b->p, b->cap);
  memset(b, 0, sizeof *b);
}
