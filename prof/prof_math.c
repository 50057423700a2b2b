/* prof_math.c -- the numbers behind sampling: the per-thread PRNG, the
 * geometric (discrete exponential) wait between samples, and the unbiasing
 * of sampled counters, forward at record time and inverted at dump time.
 *
 * libnalloc does not link libm (a program linking -lnalloc must not need
 * -lm), so ln() and exp() are implemented here. They are only used on the
 * sampled slow path and in dumps; against glibc libm their relative error
 * is below 1e-13 (exp, near its range limits) and 3e-16 (ln; 5e-16 for x
 * within 1/2 of 1, where ln(x) is small: tests/prof/unit_math.c). */
#include "prof_internal.h"

#include <string.h>

static const double LN2 = 0.69314718055994530942;

/* x = m * 2^e with m in [sqrt(1/2), sqrt(2)), for x positive and
 * normal (bits b): returns m, sets *e. */
static NALLOC_ALWAYS_INLINE double ln_reduce(uint64_t b, int *e) {
  *e = (int)(b >> 52) - 1023;
  b = (b & (((uint64_t)1 << 52) - 1)) | ((uint64_t)1023 << 52);
  double m;
  memcpy(&m, &b, sizeof m);
  if (m > 1.41421356237309504880) {
    m *= 0.5;
    ++*e;
  }
  return m;
}

/* ln(x) for x > 0: x = m * 2^e (ln_reduce), then ln(m) = 2 atanh(s),
 * s = (m-1)/(m+1), |s| < 0.172, by its odd series. */
double prof_ln(double x) {
  if (!(x > 0)) return -1e308;
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  if ((b >> 52) == 0) { /* subnormal: scale up first */
    return prof_ln(x * 18014398509481984.0 /* 2^54 */) - 54 * LN2;
  }
  int e;
  double m = ln_reduce(b, &e);
  /* |s| < 0.172: 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...); 12 terms leave
   * s^25/25 < 1e-20. Horner written out with constant reciprocals: the
   * draw of every sample's wait calls this, and a loop over 1.0/k cost
   * 12 divisions (142 instructions a call). */
  double s = (m - 1) / (m + 1), s2 = s * s;
  double sum =
      1 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 * (1.0 / 9 + s2 * (
      1.0 / 11 + s2 * (1.0 / 13 + s2 * (1.0 / 15 + s2 * (1.0 / 17 + s2 * (
      1.0 / 19 + s2 * (1.0 / 21 + s2 * (1.0 / 23)))))))))));
  sum *= s;
  return 2 * sum + e * LN2;
}

/* ln(u) for u in [2^-53, 1] (the draw's uniform: normal, positive), for
 * the wait between samples: prof_ln's reduction, without its checks, and
 * its series to s^13/13 (the rest, 2 s^15/15 with |s| < 0.172, is under
 * 5e-13, so a wait of R = 2^19 bytes moves by under 3e-7 bytes, and its
 * whole bytes only when it is that close to an integer). prof_ln cost
 * ~54 instructions at every sample (bench-random). */
static inline double ln_unit(double u) {
  uint64_t b;
  memcpy(&b, &u, sizeof b);
  int e;
  double m = ln_reduce(b, &e);
  double s = (m - 1) / (m + 1), s2 = s * s;
  double sum = 1 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 * (
               1.0 / 9 + s2 * (1.0 / 11 + s2 * (1.0 / 13))))));
  return 2 * s * sum + e * LN2;
}

double prof_ln_unit(double u) { return ln_unit(u); }

/* exp(x): x = k ln2 + r, |r| <= ln2/2, Taylor series for e^r, times 2^k. */
double prof_exp(double x) {
  if (x < -708) return 0;
  if (x > 709) return 1e308;
  double kd = x / LN2;
  int k = (int)(kd < 0 ? kd - 0.5 : kd + 0.5);
  /* |r| <= ln2/2: Taylor to r^17/17! < 1e-19, by Horner with the
   * reciprocal factorials folded in (1 + r/1 (1 + r/2 (1 + ...))). */
  static const double inv[18] = {0,        1.0,      1.0 / 2,  1.0 / 3,
                                 1.0 / 4,  1.0 / 5,  1.0 / 6,  1.0 / 7,
                                 1.0 / 8,  1.0 / 9,  1.0 / 10, 1.0 / 11,
                                 1.0 / 12, 1.0 / 13, 1.0 / 14, 1.0 / 15,
                                 1.0 / 16, 1.0 / 17};
  double r = x - k * LN2, sum = 1;
  for (int i = 17; i >= 1; i--) sum = 1 + sum * r * inv[i];
  uint64_t b = (uint64_t)(k + 1023) << 52;
  double p;
  memcpy(&p, &b, sizeof p);
  return sum * p;
}

/* 1 - exp(-t) without cancellation for small t: the series t - t^2/2! +
 * t^3/3! - ... to t^13/13! up to t = 1/4 (the next term is under 1e-17
 * of the sum), 13 multiply-adds where 1 - prof_exp(-t) costs 131
 * instructions and loses bits to the subtraction. prof_invert's bisection
 * and prof_unbias_one's large objects come here. */
static double one_minus_exp_neg(double t) {
  if (t < 1e-4) return t * (1 - t * (0.5 - t / 6));
  if (t <= 0.25) {
    double sum =
        1 - t * (1.0 / 2 - t * (1.0 / 6 - t * (1.0 / 24 - t * (1.0 / 120 - t * (
        1.0 / 720 - t * (1.0 / 5040 - t * (1.0 / 40320 - t * (1.0 / 362880 - t * (
        1.0 / 3628800 - t * (1.0 / 39916800 - t * (1.0 / 479001600 - t * (
        1.0 / 6227020800.0))))))))))));
    return t * sum;
  }
  return 1 - prof_exp(-t);
}

/* 2^-lg comes from its bits (prof_pow2_neg, prof_internal.h). Here and
 * there the conversions go through int64_t (every value fits): an
 * unsigned 64-bit conversion is ~8 instructions on x86-64, one of them a
 * branch, where a signed one is one (the unbias and prof_draw_wait run at
 * every sampled malloc, and the unbias at its free: ~45 instructions a
 * sample on bench-random, for the same results bit for bit). */

/* splitmix64: tiny state, good enough statistics for sampling. */
uint64_t prof_prng_next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Number of unsampled bytes before the next sampled one, when each byte is
 * sampled independently with p = 2^-lg (jemalloc's per-byte Bernoulli):
 * floor(ln(u) / ln(1-p)), u uniform in (0,1]. The allocator subtracts each
 * request from the countdown and samples when it goes negative, i.e. when
 * the request covers the sampled byte; so an object of Z bytes is sampled
 * with probability 1-(1-p)^Z ~ 1-exp(-Z/R), which prof_unbias_one undoes.
 * lg 0 gives -1, so that every request is sampled, malloc(0) included. */
int64_t prof_draw_wait(uint64_t *state, unsigned lg) {
  if (lg == 0) return -1;
  double u = (double)(int64_t)((prof_prng_next(state) >> 11) + 1) *
             (1.0 / 9007199254740992.0); /* (0, 1] */
  double p = prof_pow2_neg(lg);
  double l1p = p < 1e-4 ? -(p + p * p * (0.5 + p / 3)) : prof_ln(1 - p);
  double w = ln_unit(u) / l1p;
  if (w > (double)((uint64_t)1 << 62)) return (int64_t)1 << 62;
  return (int64_t)w;
}

/* Unbiased contribution of one sampled object of `size` bytes at rate
 * R = 2^lg: 1/P objects and size/P bytes, P = 1-exp(-size/R). Free
 * subtracts exactly the same values (same inputs, same arithmetic).
 *
 * Every sampled malloc and its free come here, with t = size/R below 1/8
 * for every small block at the default rate. There size/P = R B(t), B(t) =
 * t/(1-exp(-t)) = 1 + t/2 + t^2/12 - t^4/720 + t^6/30240 - t^8/1209600 +
 * t^10/47900160 - ... (Bernoulli numbers; the next term is under 4e-17 of
 * the sum for t <= 1/4): a polynomial in t^2 and one division, for the
 * objects, where 1/P through 1-exp(-t) cost ~95 instructions a call. */
void prof_unbias_one(size_t size, unsigned lg, uint64_t *uobjs,
                     uint64_t *ubytes) {
  if (lg == 0 || size == 0) {
    *uobjs = (uint64_t)1 << PROF_FP;
    *ubytes = size;
    return;
  }
  double t = (double)(int64_t)size * prof_pow2_neg(lg);
  if (t <= 0.25) {
    prof_unbias_series(size, lg, t, uobjs, ubytes);
    return;
  }
  double inv = 1 / one_minus_exp_neg(t); /* one division for both */
  prof_unbias_round((double)((uint64_t)1 << PROF_FP) * inv, (double)(int64_t)size * inv,
                    uobjs, ubytes);
}

/* An object prof_unbias_terms does not take (t > 1/4, size 0, and every
 * object of a tctx of lg > PROF_LG_TERMS): its estimate from
 * prof_unbias_one, less the shares of it that prof_cnt_unbias adds from
 * the objects and bytes (n 2^PROF_FP/2 + B 2^PROF_FP/(12R) objects, n R +
 * B/2 bytes), so that it reads back as its estimate, within 1/2 of a
 * 2^-PROF_FP object. A term may be below 0: the counters add modulo 2^64
 * and prof_cnt_unbias reads their sums as int64_t. */
prof_terms_t prof_unbias_terms_one(size_t size, unsigned lg) {
  uint64_t uo, ub;
  prof_unbias_one(size, lg, &uo, &ub);
  if (lg == 0 || lg > PROF_LG_TERMS) return (prof_terms_t){uo, ub};
  double t = (double)(int64_t)size * prof_pow2_neg(lg);
  double share = (double)((uint64_t)1 << PROF_FP) * (0.5 + t * (1.0 / 12));
  const double lim = 4611686018427387904.0; /* 2^62: a size no malloc gives */
  return (prof_terms_t){uo - (uint64_t)(int64_t)(share > lim ? lim : share + 0.5),
                        12 * ub - 12 * ((uint64_t)1 << lg) - 6 * (uint64_t)size};
}

/* Reads an int64_t sum of terms (or counts) as a count: at least 0 (a
 * racing snapshot), at most 2^62. */
static uint64_t cnt_round(double x) {
  const double lim = 4611686018427387904.0;
  return x <= 0 ? 0 : (uint64_t)(int64_t)(x > lim ? lim : x + 0.5);
}

void prof_cnt_unbias(prof_cnt_t *c, unsigned lg) {
  nalloc_assert(lg != 0);
  double a1 = (double)(int64_t)c->v[C_UOBJS], a2 = (double)(int64_t)c->v[C_UBYTES];
  if (lg > PROF_LG_TERMS) { /* the estimates themselves */
    c->v[C_UOBJS] = cnt_round(a1);
    c->v[C_UBYTES] = cnt_round(a2);
    return;
  }
  double n = (double)(int64_t)c->v[C_OBJS], B = (double)(int64_t)c->v[C_BYTES];
  double one = (double)((uint64_t)1 << PROF_FP), inv_R = prof_pow2_neg(lg);
  c->v[C_UOBJS] = cnt_round(a1 + n * (one * 0.5) + B * inv_R * (one * (1.0 / 12)));
  c->v[C_UBYTES] = cnt_round(n * (double)((int64_t)1 << lg) + B * 0.5 + a2 * (1.0 / 12));
}

/* The readers (google-pprof, jeprof, Go pprof) multiply each line's count
 * and bytes by 1/(1-exp(-(bytes/count)/R)). Given our unbiased estimates
 * (C objects, S bytes) this picks the integer count n and bytes b to write
 * so that the reader's correction gives back S exactly (jemalloc's
 * "pre-bias" idea, with the bytes solved for after rounding the count, so
 * that a line with few samples is not skewed by that rounding). */
void prof_invert(uint64_t uobjs, uint64_t ubytes, unsigned lg, uint64_t *n,
                 uint64_t *b) {
  double C = (double)uobjs / (double)((uint64_t)1 << PROF_FP);
  double S = (double)ubytes;
  double R = (double)((uint64_t)1 << lg);
  if (ubytes == 0 || uobjs == 0) {
    /* A count without bytes would make the readers divide by zero. */
    *n = 0;
    *b = 0;
    return;
  }
  double x = S / C; /* average size */
  double y = S * one_minus_exp_neg(x / R);
  double nd = y / x;
  uint64_t nn = (uint64_t)(nd + 0.5);
  if (nn < 1) nn = 1;
  /* b/(1-exp(-b/(nR))) >= nR for every b, so n must not exceed S/R. */
  if ((double)nn * R > S) {
    nn = (uint64_t)(S / R);
    if (nn < 1) {
      *n = 1;
      *b = ubytes;
      return;
    }
  }
  double nR = (double)nn * R, lo = 0, hi = S;
  for (int i = 0; i < 80; i++) {
    double mid = 0.5 * (lo + hi);
    double f = mid / one_minus_exp_neg(mid / nR);
    if (f > S)
      hi = mid;
    else
      lo = mid;
  }
  /* Of the two integers around the solution, keep the one whose
   * reader-side value lands closer to S. */
  double bs = 0.5 * (lo + hi);
  uint64_t b0 = (uint64_t)bs, b1 = b0 + 1;
  if (b0 == 0) b0 = 1;
  double e0 = (double)b0 / one_minus_exp_neg((double)b0 / nR) - S;
  double e1 = (double)b1 / one_minus_exp_neg((double)b1 / nR) - S;
  *n = nn;
  *b = (e0 < 0 ? -e0 : e0) <= (e1 < 0 ? -e1 : e1) ? b0 : b1;
}
