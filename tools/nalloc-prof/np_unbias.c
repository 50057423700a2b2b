/* np_unbias.c -- turn sampled counts into estimates of the true counts,
 * exactly the way the pprof readers do (google-pprof/jeprof AdjustSamples,
 * Go pprof scaleHeapSample), so nalloc-prof prints the numbers users get
 * from those tools.
 *
 * v2 (heap_v2/R): allocations are sampled by a Poisson process over bytes,
 * so an object of size Z is seen with probability 1-exp(-Z/R). Each line is
 * scaled by 1/(1-exp(-avg/R)) with avg = bytes/count of that line; the
 * in-use pair and the alloc pair are scaled separately. jemalloc writes its
 * counts "pre-biased" so that this per-line correction recovers its own
 * unbiased estimate exactly.
 *
 * v1 (heap/R, or a header without a label): the old remote-heap rule with
 * adj = R/2 (128 KiB if absent): if avg/adj < 1, divide count and bytes by
 * avg/adj. */
#include <math.h>

#include "np_profile.h"

static void np_scale_pair(const np_profile *p, double *n, double *s) {
  if (*n == 0 || *s == 0) return; /* nothing to scale, avoid 0/0 */
  double avg = *s / *n;
  if (p->sampling == NP_SAMPLING_V2) {
    double scale = 1.0 / (1.0 - exp(-avg / p->adjustment));
    *n *= scale;
    *s *= scale;
  } else if (p->sampling == NP_SAMPLING_V1) {
    double ratio = avg / p->adjustment;
    if (ratio < 1) {
      *n /= ratio;
      *s /= ratio;
    }
  }
}

void np_unbias_record(const np_profile *p, np_record *r) {
  for (int i = 0; i < NP_NCOUNTERS; i++) r->v[i] = (double)r->raw[i];
  if (p->sampling == NP_SAMPLING_NONE) return;
  np_scale_pair(p, &r->v[NP_INUSE_OBJECTS], &r->v[NP_INUSE_SPACE]);
  np_scale_pair(p, &r->v[NP_ALLOC_OBJECTS], &r->v[NP_ALLOC_SPACE]);
}
