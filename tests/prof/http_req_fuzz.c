/* http_req_fuzz.c -- libFuzzer target for the profile server's request
 * parser (prof/prof_http_req.c), built with clang -fsanitize=fuzzer,address
 * (tests/prof/CMakeLists.txt) and run for a bounded time by ctest.
 *
 * Beyond "no crash, no out-of-bounds read" it checks what the server
 * relies on: a complete head ends in an empty line and is a prefix of the
 * input, its path and query lie inside it, a head that parses has no
 * prefix that is refused, query numbers respect their bound, and the
 * symbol tokenizer always makes progress. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_http_req.h"

#define REQUIRE(c)                                                      \
  do {                                                                  \
    if (!(c)) {                                                         \
      fprintf(stderr, "http_req_fuzz: %s:%d: %s\n", __FILE__, __LINE__, #c); \
      abort();                                                          \
    }                                                                   \
  } while (0)

static void check_head(const char *d, size_t n, int h, const ph_req_t *r) {
  REQUIRE((size_t)h <= n && h >= 2);
  REQUIRE(d[h - 1] == '\n');
  REQUIRE(d[h - 2] == '\n' || (h >= 3 && d[h - 2] == '\r' && d[h - 3] == '\n'));
  REQUIRE(r->path >= d && r->path + r->path_len <= d + h);
  REQUIRE(r->path_len >= 1 && r->path[0] == '/');
  if (r->query != NULL) {
    REQUIRE(r->query >= r->path + r->path_len && r->query + r->query_len <= d + h);
    REQUIRE(r->query[-1] == '?');
  }
  ph_req_t again;
  REQUIRE(ph_req_parse(d, (size_t)h, &again) == h); /* the head alone */
  /* No prefix of a good head is refused. */
  for (size_t k = 0; k < (size_t)h; k += 1 + (size_t)h / 16)
    REQUIRE(ph_req_parse(d, k, &again) == 0);
  uint64_t v = 0;
  char buf[16];
  if (ph_query_uint(r->query, r->query_len, "seconds", 300, &v) == 1)
    REQUIRE(v <= 300);
  if (ph_query_get(r->query, r->query_len, "debug", buf, sizeof buf))
    REQUIRE(strlen(buf) < sizeof buf);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  const char *d = (const char *)data;
  ph_req_t r;
  int h = ph_req_parse(d, size, &r);
  if (h > 0) check_head(d, size, h, &r);
  if (h < 0) REQUIRE(h == -400 || h == -501 || h == -505);
  /* The whole input as a query string and as a symbol request body. */
  char buf[8];
  ph_query_get(d, size, "seconds", buf, sizeof buf);
  uint64_t v;
  if (ph_query_uint(d, size, "debug", 1000, &v) == 1) REQUIRE(v <= 1000);
  const char *p = d, *end = d + size;
  for (;;) {
    const char *before = p;
    int k = ph_sym_next(&p, end, &v);
    REQUIRE(p <= end);
    if (k == 0) break;
    REQUIRE(p > before);
  }
  REQUIRE(p == end);
  return 0;
}
