/* prof_gzip.c -- gzip for the profile server's protobuf responses, which
 * pprof expects gzip'd (Go's net/http/pprof sends them so).
 *
 * A small deflate of our own, since libnalloc links no zlib: greedy LZ77
 * over a 32 KiB window (hash chains on 3-byte prefixes) coded with the
 * fixed Huffman tables of RFC 1951 (BTYPE 01), in one block. Profiles are
 * repetitive (varint ids, repeated stacks, paths), so this gets most of
 * what zlib's dynamic tables would, with no tables to build and send.
 * All scratch memory comes from ph_mem: nothing here calls malloc. */
#include "prof_http.h"

#include <string.h>

#define GZ_WBITS 15
#define GZ_WSIZE (1u << GZ_WBITS)
#define GZ_HBITS 15
#define GZ_MIN 3
#define GZ_MAX 258
#define GZ_CHAIN 32   /* candidates tried per position */
#define GZ_NICE 128   /* a match this long is taken at once */

uint32_t ph_crc32(uint32_t crc, const void *p, size_t n) {
  uint32_t tab[256];
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    tab[i] = c;
  }
  const unsigned char *s = p;
  crc = ~crc;
  for (size_t i = 0; i < n; i++) crc = tab[(crc ^ s[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

/* ---- bit writer (LSB first, into a buffer reserved beforehand) ---------- */

typedef struct {
  unsigned char *p;
  uint64_t bits;
  unsigned nbits;
} gz_bits_t;

static void gz_put(gz_bits_t *w, uint32_t v, unsigned n) {
  w->bits |= (uint64_t)v << w->nbits;
  w->nbits += n;
  while (w->nbits >= 8) {
    *w->p++ = (unsigned char)w->bits;
    w->bits >>= 8;
    w->nbits -= 8;
  }
}

/* Huffman codes go out most significant bit first. */
static void gz_code(gz_bits_t *w, uint32_t code, unsigned n) {
  uint32_t r = 0;
  for (unsigned i = 0; i < n; i++) r |= ((code >> i) & 1) << (n - 1 - i);
  gz_put(w, r, n);
}

/* Literal/length symbol with the fixed code (RFC 1951 3.2.6). */
static void gz_sym(gz_bits_t *w, unsigned s) {
  if (s < 144) gz_code(w, 0x30 + s, 8);
  else if (s < 256) gz_code(w, 0x190 + s - 144, 9);
  else if (s < 280) gz_code(w, s - 256, 7);
  else gz_code(w, 0xc0 + s - 280, 8);
}

static const uint16_t gz_lbase[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11, 13,
                                      15, 17, 19, 23, 27, 31, 35, 43, 51, 59,
                                      67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t gz_lextra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                      2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const uint16_t gz_dbase[30] = {
    1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
    193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const uint8_t gz_dextra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                      6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

static void gz_match(gz_bits_t *w, unsigned len, unsigned dist) {
  unsigned l = 28;
  while (gz_lbase[l] > len) l--;
  gz_sym(w, 257 + l);
  gz_put(w, len - gz_lbase[l], gz_lextra[l]);
  unsigned d = 29;
  while (gz_dbase[d] > dist) d--;
  gz_code(w, d, 5);
  gz_put(w, dist - gz_dbase[d], gz_dextra[d]);
}

/* ---- LZ77 --------------------------------------------------------------- */

static uint32_t gz_hash(const unsigned char *s) {
  uint32_t v = (uint32_t)s[0] | (uint32_t)s[1] << 8 | (uint32_t)s[2] << 16;
  return (v * 2654435761u) >> (32 - GZ_HBITS);
}

/* The longest earlier match for position i (0 if none of GZ_MIN). */
static unsigned gz_longest(const unsigned char *s, size_t n, size_t i,
                           const uint32_t *head, const uint32_t *prev,
                           unsigned *dist) {
  size_t maxlen = n - i < GZ_MAX ? n - i : GZ_MAX;
  unsigned best = 0;
  uint32_t cand = head[gz_hash(s + i)];
  for (int tries = 0; cand != 0 && tries < GZ_CHAIN; tries++) {
    size_t j = cand - 1;
    if (i - j > GZ_WSIZE) break; /* deflate reaches back 32768 bytes */
    if (s[j + best] == s[i + best]) {
      unsigned l = 0;
      while (l < maxlen && s[j + l] == s[i + l]) l++;
      if (l > best) {
        best = l;
        *dist = (unsigned)(i - j);
        if (l >= GZ_NICE || l == maxlen) break;
      }
    }
    uint32_t nx = prev[j & (GZ_WSIZE - 1)];
    if (nx == 0 || nx - 1 >= j) break; /* chain left the window */
    cand = nx;
  }
  return best >= GZ_MIN ? best : 0;
}

static void gz_insert(const unsigned char *s, size_t i, uint32_t *head,
                      uint32_t *prev) {
  uint32_t h = gz_hash(s + i);
  prev[i & (GZ_WSIZE - 1)] = head[h];
  head[h] = (uint32_t)(i + 1);
}

/* One fixed-Huffman block holding all of s[0, n). Inputs are below 4 GiB
 * (positions are kept in 32 bits). */
static void gz_deflate(const unsigned char *s, size_t n, gz_bits_t *w,
                       uint32_t *head, uint32_t *prev) {
  gz_put(w, 1, 1); /* BFINAL */
  gz_put(w, 1, 2); /* BTYPE 01: fixed Huffman codes */
  size_t i = 0;
  while (i < n) {
    unsigned dist = 0,
             len = n - i >= GZ_MIN ? gz_longest(s, n, i, head, prev, &dist) : 0;
    if (len == GZ_MIN && dist > 4096) len = 0; /* costs more than literals */
    if (len == 0) {
      gz_sym(w, s[i]);
      if (n - i >= GZ_MIN) gz_insert(s, i, head, prev);
      i++;
      continue;
    }
    gz_match(w, len, dist);
    for (size_t k = i; k < i + len && n - k >= GZ_MIN; k++)
      gz_insert(s, k, head, prev);
    i += len;
  }
  gz_sym(w, 256);
  if (w->nbits) gz_put(w, 0, 8 - w->nbits);
}

static void gz_le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

void ph_gzip(const void *in, size_t n, ph_buf_t *out) {
  /* Worst case: 9 bits per literal, plus header, block bits, trailer. */
  size_t worst = n + n / 8 + 64;
  if (n >= ((size_t)1 << 32) || !ph_buf_reserve(out, worst)) {
    out->err = true;
    return;
  }
  size_t tabsz = ((size_t)1 << GZ_HBITS) * 4 + GZ_WSIZE * 4;
  uint32_t *head = ph_mem(tabsz);
  if (head == NULL) {
    out->err = true;
    return;
  }
  uint32_t *prev = head + ((size_t)1 << GZ_HBITS);
  unsigned char *p = (unsigned char *)out->p + out->len;
  static const unsigned char hdr[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
  memcpy(p, hdr, sizeof hdr);
  gz_bits_t w = {p + sizeof hdr, 0, 0};
  gz_deflate(in, n, &w, head, prev);
  gz_le32(w.p, ph_crc32(0, in, n));
  gz_le32(w.p + 4, (uint32_t)n);
  out->len += (size_t)(w.p + 8 - p);
  ph_mem_free(head, tabsz);
}
