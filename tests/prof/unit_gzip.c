/* unit_gzip.c -- the profile server's gzip (prof/prof_gzip.c) against
 * zlib: every input must come back byte for byte through zlib's inflate,
 * with zlib's CRC-32 in the trailer, and repetitive input must actually
 * shrink. Inputs: empty, one byte, text, random bytes (no matches),
 * long runs, matches at the 32 KiB window edge, and several megabytes of
 * a real profile-like mix. Linked with nalloc's engine objects, so the
 * code under test is the library's own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "prof_http.h"

#include "../check_core.h"

/* Compresses in[0, n) with ph_gzip, inflates it with zlib, compares.
 * Returns the compressed size. */
static size_t roundtrip(const unsigned char *in, size_t n, const char *what) {
  ph_buf_t out = {0};
  ph_gzip(in, n, &out);
  CHECK(!out.err);
  unsigned char *back = malloc(n + 1);
  z_stream z;
  memset(&z, 0, sizeof z);
  CHECK(inflateInit2(&z, 16 + MAX_WBITS) == Z_OK); /* gzip wrapper */
  z.next_in = (unsigned char *)out.p;
  z.avail_in = (uInt)out.len;
  z.next_out = back;
  z.avail_out = (uInt)(n + 1);
  int r = inflate(&z, Z_FINISH);
  if (r != Z_STREAM_END || z.total_out != n || memcmp(back, in, n) != 0) {
    fprintf(stderr, "%s: inflate %d (%s), %lu of %zu bytes back\n", what, r,
            z.msg ? z.msg : "", z.total_out, n);
    exit(1);
  }
  CHECK(z.avail_in == 0); /* the whole member, trailer included, was read */
  inflateEnd(&z);
  size_t c = out.len;
  printf("%-28s %9zu -> %9zu bytes\n", what, n, c);
  ph_buf_free(&out);
  free(back);
  return c;
}

int main(void) {
  check_rng = 88172645463325252ull;
  roundtrip((const unsigned char *)"", 0, "empty");
  roundtrip((const unsigned char *)"x", 1, "one byte");
  const char *txt = "heap profile: 114: 7120 [142: 59278] @ heapprofile\n";
  roundtrip((const unsigned char *)txt, strlen(txt), "a line of text");

  size_t n = 3 << 20;
  unsigned char *b = malloc(n);
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)check_rnd();
  size_t c = roundtrip(b, n, "random 3 MiB");
  CHECK(c <= n + n / 8 + 64); /* the bound ph_gzip reserves */

  memset(b, 'a', n);
  c = roundtrip(b, n, "one byte repeated");
  CHECK(c < n / 100);

  /* A pattern whose repeats are exactly 32768 bytes apart (the largest
   * distance deflate allows) and just beyond. */
  for (int period = 32767; period <= 32769; period++) {
    for (size_t i = 0; i < (size_t)period; i++) b[i] = (unsigned char)check_rnd();
    for (size_t i = (size_t)period; i < 200000; i++) b[i] = b[i - (size_t)period];
    char what[40];
    snprintf(what, sizeof what, "period %d", period);
    c = roundtrip(b, 200000, what);
    if (period <= 32768) CHECK(c < 200000 / 2);
  }

  /* Profile-like: varint-ish ids and repeated stacks of hex addresses. */
  size_t at = 0;
  while (at + 200 < n) {
    uint32_t r[6];
    for (int k = 0; k < 6; k++) r[k] = (uint32_t)check_rnd();
    at += (size_t)snprintf((char *)b + at, 200, "%u: %u [%u: %u] @ 0x55%08x 0x7f%08x\n",
                           r[0] % 100, r[1] % 100000, r[2] % 100, r[3] % 100000, r[4] % 4096,
                           r[5] % 65536);
  }
  c = roundtrip(b, at, "profile-like text");
  CHECK(c < at / 2);
  for (size_t len = 0; len < 300; len++) roundtrip(b + len * 7, len, "short");

  /* CRC-32 as zlib computes it, in pieces too. */
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)check_rnd();
  uint32_t mine = ph_crc32(ph_crc32(0, b, 1000), b + 1000, n - 1000);
  CHECK(mine == (uint32_t)crc32(0, b, (uInt)n));
  free(b);
  printf("ok\n");
  return 0;
}
