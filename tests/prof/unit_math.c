/* unit_math.c -- the sampling arithmetic of prof/prof_math.c against
 * truth computed here with libm (which libnalloc does not link, hence its
 * own ln/exp):
 * - prof_ln against log() over normal and subnormal inputs: relative
 *   error under 3e-16 for x outside [0.5, 1.5], under 5e-16 inside it
 *   (where ln(x) is small and the last roundings weigh more: 4.4e-16
 *   measured), what prof_math.c's header claims;
 * - prof_ln_unit (the draw's ln, a shorter series) against log() over
 *   the uniforms the draw feeds it: absolute error under 1e-12;
 * - prof_exp against exp() over [-708, 709]: relative error under 1e-13
 *   (the claim; the error grows with |x| through k*ln2);
 * - prof_draw_wait: the wait before the next sampled byte when each byte
 *   is sampled with p = 2^-lg is geometric, P(W >= k) = (1-p)^k. Over 10^6
 *   draws from a fixed seed: the mean is (1-p)/p within 5 standard errors,
 *   and a chi-square over 20 equiprobable buckets of the exact geometric
 *   distribution stays under the 1e-4 critical value (19 df: about 51); lg 0
 *   samples everything (-1);
 * - prof_draw_wait against floor(ln(u) / ln(1-p)) computed with libm for
 *   the same uniforms: within a byte (plus 1e-12 of the wait), and up
 *   to R = 2^30 equal but for at most 1 in 1,000;
 * - prof_unbias_one against the jemalloc/pprof closed form: an object of
 *   s bytes sampled at mean interval R = 2^lg stands for 1/(1-exp(-s/R))
 *   objects and s/(1-exp(-s/R)) bytes (objects in 1/2^PROF_FP units);
 * - prof_unbias_terms and prof_cnt_unbias (sampled mode's counters keep
 *   terms that the read turns into the estimates): batches of objects
 *   of sizes log-uniform from 0 bytes to 2^36, added and some taken out
 *   again modulo 2^64 as a tctx's sets are, read back as the sums of the
 *   closed form over the objects still in, within the series' left-out
 *   terms (t^4/720 < 6e-6 of each object's estimate) and half a unit an
 *   object; one object reads back as prof_unbias_one's, and the peak's
 *   byte estimate (prof_terms_ubytes) as its read;
 * - prof_invert: what a reader (pprof, jeprof) computes from the written
 *   (count, bytes), n/P and b/P with P = 1-exp(-(b/n)/R), must give back
 *   the unbiased bytes, and k sampled objects of one size s must be
 *   written as k objects of k*s bytes.
 * Linked with nalloc's engine objects: the code under test is the
 * library's own. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "prof_internal.h"

#include "../check_core.h"

/* uniform in [0, 1) */
static double unif(void) { return (double)(check_rnd() >> 11) * 0x1p-53; }

static double rel(double got, double want) {
  return want == 0 ? fabs(got) : fabs(got - want) / fabs(want);
}

static void check_ln(void) {
  /* worst relative error away from 1 ([0], bound 3e-16) and within 1/2
   * of it ([1], bound 5e-16) */
  double worst[2] = {0, 0}, at[2] = {0, 0};
#define LN_AT(x)                                               \
  do {                                                         \
    double e_ = rel(prof_ln(x), log(x));                       \
    int w_ = fabs((x) - 1) <= 0.5;                             \
    if (e_ > worst[w_]) worst[w_] = e_, at[w_] = (x);          \
  } while (0)
  /* fixed points: powers of two, the sqrt(2) split, near 1, the ends */
  const double fixed[] = {2, 0.5, 1.4142135623730950, 1.4142135623730951,
                          0.7071067811865475, 1 + 1e-12, 1 - 1e-12, 3, 10,
                          1e-300, 1e300, 4.9e-324, 2.2250738585072014e-308,
                          1.7976931348623157e308};
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) LN_AT(fixed[i]);
  CHECKF(prof_ln(1) == 0, "ln(1) = %g", prof_ln(1));
  /* log-uniform over the whole positive range, subnormals included */
  for (int i = 0; i < 2000000; i++) {
    double x = ldexp(1 + unif(), (int)(check_rnd() % 2100) - 1074);
    if (x == 0 || isinf(x) || x == 1) continue;
    LN_AT(x);
  }
  /* near 1, where ln is small and a relative bound is hardest */
  for (int i = 0; i < 1000000; i++) {
    double x = 1 + (unif() - 0.5) * (i % 2 ? 1e-3 : 1);
    if (x == 1) continue;
    LN_AT(x);
  }
#undef LN_AT
  printf("prof_ln: worst relative error %.3g at %.17g, within 1/2 of 1 %.3g at %.17g\n",
         worst[0], at[0], worst[1], at[1]);
  CHECKF(worst[0] < 3e-16, "prof_ln relative error %.3g at %.17g (claim: < 3e-16)", worst[0],
         at[0]);
  CHECKF(worst[1] < 5e-16, "prof_ln relative error %.3g at %.17g (claim: < 5e-16 near 1)",
         worst[1], at[1]);
  CHECKF(prof_ln(0) < -1e300 && prof_ln(-1) < -1e300, "ln of x <= 0 must be very negative");
}

/* The draw's ln (prof_ln_unit) over its domain, the uniforms k 2^-53:
 * absolute error, which is what moves a wait (w = ln(u) / ln(1-p): a
 * wait of R bytes moves by R times it). */
static void check_ln_unit(void) {
  double worst = 0, at = 0;
#define LNU_AT(u)                                              \
  do {                                                         \
    double e_ = fabs(prof_ln_unit(u) - log(u));                \
    if (e_ > worst) worst = e_, at = (u);                      \
  } while (0)
  const double fixed[] = {0x1p-53, 1, 0.5, 0.7071067811865475, 0.7071067811865476,
                          1 - 0x1p-53, 0x1.6a09e667f3bcdp-1, 0x1.6a09e667f3bccp-30};
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) LNU_AT(fixed[i]);
  for (int i = 0; i < 2000000; i++) {
    /* what prof_draw_wait draws: (k + 1) 2^-53, k uniform on 53 bits */
    double u = (double)(int64_t)((check_rnd() >> 11) + 1) * 0x1p-53;
    LNU_AT(u);
    /* and log-uniform down to 2^-53 */
    double v = ldexp(1 + unif(), -1 - (int)(check_rnd() % 53));
    LNU_AT(v);
  }
#undef LNU_AT
  printf("prof_ln_unit: worst absolute error %.3g at %.17g\n", worst, at);
  CHECKF(worst < 1e-12, "prof_ln_unit absolute error %.3g at %.17g (claim: < 1e-12)", worst,
         at);
  CHECKF(prof_ln_unit(1) == 0, "ln_unit(1) = %g", prof_ln_unit(1));
}

static void check_exp(void) {
  double worst = 0, at = 0, worst_small = 0, at_small = 0;
  for (int i = 0; i < 2000000; i++) {
    double x = -708 + unif() * (709 + 708);
    double e = rel(prof_exp(x), exp(x));
    if (e > worst) worst = e, at = x;
  }
  const double fixed[] = {0, 1, -1, 0.34657359027997264, -0.34657359027997264,
                          0.6931471805599453, -708, 709, 1e-300, -1e-300};
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) {
    double e = rel(prof_exp(fixed[i]), exp(fixed[i]));
    if (e > worst) worst = e, at = fixed[i];
  }
  /* small arguments, where the unbiasing uses it: e^-t for t = s/R */
  for (int i = 0; i < 500000; i++) {
    double x = -unif() * 40;
    double e = rel(prof_exp(x), exp(x));
    if (e > worst_small) worst_small = e, at_small = x;
  }
  printf("prof_exp: worst relative error %.3g at %.17g; on [-40, 0] %.3g at %.17g\n",
         worst, at, worst_small, at_small);
  CHECKF(worst < 1e-13, "prof_exp relative error %.3g at %.17g (claim: < 1e-13)", worst, at);
  CHECKF(worst_small < 1e-14, "prof_exp relative error %.3g at %.17g on [-40, 0]",
         worst_small, at_small);
  CHECKF(prof_exp(0) == 1, "exp(0) = %.17g", prof_exp(0));
}

/* Chi-square of n draws of prof_draw_wait(lg) against the geometric law
 * P(W >= k) = q^k, q = 1-p, over NB buckets of (nearly) equal probability. */
enum { NDRAW = 1000000, NB = 20 };
static void check_wait(unsigned lg) {
  uint64_t state = 12345 + lg;
  double p = ldexp(1, -(int)lg), q = 1 - p, lq = log1p(-p);
  /* bucket j holds [edge[j], edge[j+1]); edges at the j/NB quantiles of
   * the continuous approximation, made integer and distinct */
  int64_t edge[NB + 1];
  int nb = 0;
  edge[0] = 0;
  for (int j = 1; j < NB; j++) {
    int64_t e = (int64_t)ceil(log1p(-(double)j / NB) / lq);
    if (e > edge[nb]) edge[++nb] = e;
  }
  edge[++nb] = INT64_MAX;
  double cnt[NB + 1] = {0}, sum = 0;
  for (int i = 0; i < NDRAW; i++) {
    int64_t w = prof_draw_wait(&state, lg);
    CHECKF(w >= 0, "lg %u: negative wait %lld", lg, (long long)w);
    sum += (double)w;
    int j = 0;
    while (w >= edge[j + 1]) j++;
    cnt[j]++;
  }
  double mean = sum / NDRAW, want = q / p, sd = sqrt(q) / p / sqrt((double)NDRAW);
  double chi = 0;
  for (int j = 0; j < nb; j++) {
    /* exact: P(a <= W < b) = q^a - q^b */
    double pa = exp((double)edge[j] * lq);
    double pb = edge[j + 1] == INT64_MAX ? 0 : exp((double)edge[j + 1] * lq);
    double ex = (pa - pb) * NDRAW;
    chi += (cnt[j] - ex) * (cnt[j] - ex) / ex;
  }
  /* critical values of chi-square at 1e-4 for nb-1 degrees of freedom,
   * approximated by Wilson-Hilferty (within 1% here) */
  double df = nb - 1, z = 3.719;
  double crit = df * pow(1 - 2 / (9 * df) + z * sqrt(2 / (9 * df)), 3);
  printf("draw_wait lg %2u: mean %.4g (want %.4g, sd %.3g), chi2 %.2f over %d buckets (crit %.1f)\n",
         lg, mean, want, sd, chi, nb, crit);
  CHECKF(fabs(mean - want) < 5 * sd, "lg %u: mean wait %.6g, want %.6g +- %.3g", lg, mean,
         want, 5 * sd);
  CHECKF(chi < crit, "lg %u: chi-square %.2f >= %.1f: not geometric", lg, chi, crit);
}

/* prof_draw_wait against the closed form floor(ln(u) / ln(1-p)) with
 * libm, for the same uniforms u (its PRNG replayed here): each wait within
 * a byte of it (the floor of a quotient that lands within its error of
 * an integer) plus the draw's relative error, and up to 2^30 almost
 * always equal. */
static void check_wait_exact(unsigned lg) {
  uint64_t state = 0x1234567 + lg, replay = state;
  double l1p = log1p(-ldexp(1, -(int)lg));
  int off = 0;
  for (int i = 0; i < 200000; i++) {
    int64_t w = prof_draw_wait(&state, lg);
    double u = (double)(int64_t)((prof_prng_next(&replay) >> 11) + 1) * 0x1p-53;
    double want = floor(log(u) / l1p);
    if (want > 0x1p62) want = 0x1p62;
    CHECKF(fabs((double)w - want) <= 1 + want * 1e-12, "lg %u: wait %lld, closed form %.17g",
           lg, (long long)w, want);
    off += (double)w != want;
  }
  /* the draw's ln is within 1e-12 (check_ln_unit): a wait of R bytes
   * moves by up to R 1e-12 (with R = 2^40, half of them by a byte) */
  printf("draw_wait lg %2u: %d of 200000 waits off the closed form\n", lg, off);
  if (lg <= 30) CHECKF(off <= 200, "lg %u: %d waits off the closed form", lg, off);
}

static void check_unbias(void) {
  const double one = (double)(1u << PROF_FP);
  for (unsigned lg = 1; lg <= 30; lg++) {
    double R = ldexp(1, (int)lg);
    for (int i = 0; i < 20000; i++) {
      /* sizes log-uniform from 1 byte to 2^36 */
      size_t s = (size_t)ldexp(1 + unif(), (int)(check_rnd() % 36));
      uint64_t uo, ub;
      prof_unbias_one(s, lg, &uo, &ub);
      double P = -expm1(-(double)s / R);
      double wo = one / P, wb = (double)s / P;
      const double cap = 0x1p50;
      if (wo > cap) wo = cap;
      if (wb > cap) wb = cap;
      /* rounding to an integer, plus relative error of the arithmetic */
      CHECKF(fabs((double)uo - wo) <= 0.5 + wo * 1e-12,
             "unbias objs s=%zu lg=%u: %llu want %.3f", s, lg, (unsigned long long)uo, wo);
      CHECKF(fabs((double)ub - wb) <= 0.5 + wb * 1e-12,
             "unbias bytes s=%zu lg=%u: %llu want %.3f", s, lg, (unsigned long long)ub, wb);
    }
  }
  uint64_t uo, ub;
  prof_unbias_one(100, 0, &uo, &ub); /* exact mode */
  CHECKF(uo == 1u << PROF_FP && ub == 100, "lg 0: %llu %llu", (unsigned long long)uo,
         (unsigned long long)ub);
  prof_unbias_one(0, 19, &uo, &ub);
  CHECKF(uo == 1u << PROF_FP && ub == 0, "size 0: %llu %llu", (unsigned long long)uo,
         (unsigned long long)ub);
}

/* A size for check_terms: 0 now and then, else log-uniform from 1 byte
 * to 2^36. */
static size_t terms_size(void) {
  if (check_rnd() % 64 == 0) return 0;
  return (size_t)ldexp(1 + unif(), (int)(check_rnd() % 36));
}

static void check_terms(void) {
  const double one = (double)(1u << PROF_FP), cap = 0x1p50;
  for (unsigned lg = 1; lg <= 48; lg++) {
    double R = ldexp(1, (int)lg);
    for (int round = 0; round < 300; round++) {
      /* k objects in, the first `out` of them out again */
      enum { K = 64 };
      size_t sz[K];
      unsigned k = 1 + (unsigned)(check_rnd() % K), out = (unsigned)(check_rnd() % k);
      prof_cnt_t c = {{0, 0, 0, 0}};
      double wo = 0, wb = 0, slack = 0;
      for (unsigned i = 0; i < k; i++) {
        sz[i] = terms_size();
        /* a third of the rounds at rates whose objects are all series */
        if (round % 3 == 0 && (double)sz[i] > R / 4) sz[i] = (size_t)(R / 4);
        prof_terms_t u = prof_unbias_terms(sz[i], lg);
        c.v[C_OBJS] += 1, c.v[C_BYTES] += sz[i], c.v[C_UOBJS] += u.uobjs, c.v[C_UBYTES] += u.ubytes;
        if (i < out) continue;
        double P = sz[i] == 0 ? 1 : -expm1(-(double)sz[i] / R);
        double o = one / P, b = (double)sz[i] / P;
        wo += o > cap ? cap : o;
        wb += b > cap ? cap : b;
        double t = (double)sz[i] / R;
        slack += t <= 0.25 ? pow(t, 4) / 720 * (o + b) : 0;
      }
      for (unsigned i = 0; i < out; i++) {
        prof_terms_t u = prof_unbias_terms(sz[i], lg);
        c.v[C_OBJS] -= 1, c.v[C_BYTES] -= sz[i], c.v[C_UOBJS] -= u.uobjs, c.v[C_UBYTES] -= u.ubytes;
      }
      prof_cnt_unbias(&c, lg);
      double tol = 1.0 + 0.5 * k + slack + (wo + wb) * 1e-12;
      CHECKF(fabs((double)c.v[C_UOBJS] - wo) <= tol,
             "terms lg=%u: %u objects in, %u out: objects %llu want %.1f", lg, k, out,
             (unsigned long long)c.v[C_UOBJS], wo);
      CHECKF(fabs((double)c.v[C_UBYTES] - wb) <= tol,
             "terms lg=%u: %u objects in, %u out: bytes %llu want %.1f", lg, k, out,
             (unsigned long long)c.v[C_UBYTES], wb);
    }
  }
  /* one object, every path (series, t > 1/4, size 0, lg past
   * PROF_LG_TERMS): prof_unbias_one's values, and the peak's bytes */
  for (unsigned lg = 1; lg <= 62; lg++) {
    for (int i = 0; i < 2000; i++) {
      size_t s = terms_size();
      uint64_t uo, ub;
      prof_terms_t u = prof_unbias_terms(s, lg);
      prof_unbias_one(s, lg, &uo, &ub);
      prof_cnt_t c = {{1, s, u.uobjs, u.ubytes}};
      prof_cnt_unbias(&c, lg);
      double t = ldexp((double)s, -(int)lg), slack = t <= 0.25 ? pow(t, 4) / 720 : 0;
      CHECKF(fabs((double)c.v[C_UOBJS] - (double)uo) <= 1 + slack * (double)uo,
             "terms s=%zu lg=%u: objects %llu, prof_unbias_one %llu", s, lg,
             (unsigned long long)c.v[C_UOBJS], (unsigned long long)uo);
      CHECKF(fabs((double)c.v[C_UBYTES] - (double)ub) <= 1 + slack * (double)ub,
             "terms s=%zu lg=%u: bytes %llu, prof_unbias_one %llu", s, lg,
             (unsigned long long)c.v[C_UBYTES], (unsigned long long)ub);
      int64_t est = prof_terms_ubytes(s, lg, u.ubytes);
      CHECKF(llabs(est - (int64_t)c.v[C_UBYTES]) <= 1, "terms s=%zu lg=%u: peak bytes %lld, read %llu",
             s, lg, (long long)est, (unsigned long long)c.v[C_UBYTES]);
    }
  }
}

/* What pprof / jeprof compute from a line "n: b": n/P and b/P. */
static double reader_bytes(uint64_t n, uint64_t b, double R) {
  return (double)b / -expm1(-((double)b / (double)n) / R);
}

static void check_invert(void) {
  for (unsigned lg = 1; lg <= 24; lg++) {
    double R = ldexp(1, (int)lg);
    for (int i = 0; i < 5000; i++) {
      size_t s = (size_t)ldexp(1 + unif(), (int)(check_rnd() % 30));
      uint64_t k = 1 + check_rnd() % 1000;
      uint64_t uo, ub, n, b;
      prof_unbias_one(s, lg, &uo, &ub);
      /* k samples of one stack and size, summed as the profiler does */
      uint64_t C = uo * k, S = ub * k;
      if (ub >= (1ull << 50) / 1000) continue; /* capped: not a closed form */
      prof_invert(C, S, lg, &n, &b);
      /* ubytes and uobjs are integers: their rounding (0.5 of each) is
       * a relative error eps of every sum, which moves the written count
       * and bytes by up to a few eps (nothing where ubytes is large, as
       * at the default rate; 9% for 5-byte objects at R = 2) */
      double eps = 0.5 / (double)ub + 0.5 / (double)uo;
      double ntol = 0.5 + 4 * eps * (double)k, ks = (double)k * (double)s;
      CHECKF(fabs((double)n - (double)k) <= ntol, "invert s=%zu lg=%u k=%llu: count %llu",
             s, lg, (unsigned long long)k, (unsigned long long)n);
      /* then n == k, and b is k*s to within the rounding: the reader's
       * b/P has a slope in [1/2, 1] in b, so b moves by at most twice
       * the error in S */
      if (ntol < 1)
        CHECKF(fabs((double)b - ks) <= 1 + 8 * eps * (double)S,
               "invert s=%zu lg=%u k=%llu: bytes %llu want %.0f", s, lg,
               (unsigned long long)k, (unsigned long long)b, ks);
      /* and the reader's estimate gives back S to within a byte's step
       * (d(b/P)/db <= 1 for b/n >= 0, plus the double arithmetic) */
      double back = reader_bytes(n, b, R);
      CHECKF(fabs(back - (double)S) <= 1 + (double)S * 1e-9,
             "invert s=%zu lg=%u k=%llu: reader gets %.1f bytes, want %llu", s, lg,
             (unsigned long long)k, back, (unsigned long long)S);
    }
    /* arbitrary (C, S) pairs, as a stack with several sizes has */
    for (int i = 0; i < 5000; i++) {
      uint64_t C = (1 + check_rnd() % 100000) << (check_rnd() % 8), S = 1 + check_rnd() % (1ull << 40);
      if (S * 1024 < C) continue; /* average size under 1 byte: not a real line */
      uint64_t n, b;
      prof_invert(C, S, lg, &n, &b);
      CHECKF(n >= 1 && b >= 1, "invert C=%llu S=%llu: n %llu b %llu", (unsigned long long)C,
             (unsigned long long)S, (unsigned long long)n, (unsigned long long)b);
      double back = reader_bytes(n, b, R);
      CHECKF(fabs(back - (double)S) <= 1 + (double)S * 1e-9,
             "invert C=%llu S=%llu lg=%u: (%llu, %llu) reads back as %.1f", (unsigned long long)C,
             (unsigned long long)S, lg, (unsigned long long)n, (unsigned long long)b, back);
    }
  }
  uint64_t n = 7, b = 7;
  prof_invert(0, 0, 19, &n, &b);
  CHECKF(n == 0 && b == 0, "empty line: %llu %llu", (unsigned long long)n, (unsigned long long)b);
}

int main(void) {
  check_rng = 0x2545f4914f6cdd1dull;
  check_ln();
  check_ln_unit();
  check_exp();
  CHECKF(prof_draw_wait(&(uint64_t){1}, 0) == -1, "lg 0 must sample every request");
  const unsigned lgs[] = {1, 4, 10, 19, 30};
  for (size_t i = 0; i < sizeof lgs / sizeof *lgs; i++) check_wait(lgs[i]);
  const unsigned lgx[] = {1, 4, 10, 13, 14, 19, 30, 40};
  for (size_t i = 0; i < sizeof lgx / sizeof *lgx; i++) check_wait_exact(lgx[i]);
  check_unbias();
  check_terms();
  check_invert();
  printf("ok\n");
  return 0;
}
