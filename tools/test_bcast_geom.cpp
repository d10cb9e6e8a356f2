// tools/test_bcast_geom.cpp — checks kernels/cuda/bcast_geom.h (host code of the CUDA
// broadcast kernels) against the reference offsets of kernels/ref/ref.h on random shapes.
// Run by spec/cuda_host_spec.lua: g++ -std=c++17 -Ikernels/cuda tools/test_bcast_geom.cpp
#include "bcast_geom.h"
#include <cstdio>
#include <cstdlib>
// brute force: offset of out element i in an input (reference semantics, ref.h)
static int64_t ref_off(int64_t i, int on, const int64_t *os, int in_, const int64_t *is) {
  int64_t off = 0, stride = 1;
  for (int d = on - 1; d >= 0; d--) { int64_t c = i % os[d]; i /= os[d]; int id = d - (on - in_);
    if (id >= 0) { if (is[id] != 1) off += c * stride; stride *= is[id]; } }
  return off;
}
int main() {
  srand(1); int fails = 0, cases = 0;
  for (int t = 0; t < 20000; t++) {
    int on = rand() % 6; int64_t os[8], as[8], bs[8]; int an = rand() % (on + 1), bn = rand() % (on + 1);
    int64_t n = 1;
    for (int d = 0; d < on; d++) { os[d] = 1 + rand() % 4; n *= os[d]; }
    for (int d = 0; d < an; d++) { int od = d + on - an; as[d] = rand() % 2 ? os[od] : 1; }
    for (int d = 0; d < bn; d++) { int od = d + on - bn; bs[d] = rand() % 2 ? os[od] : 1; }
    bcast_geom g; bcast_geom_make(&g, on, os, an, as, bn, bs);
    for (int64_t i = 0; i < n; i++) {
      int64_t rem = i, oa = 0, ob = 0;
      for (int d = g.ndim - 1; d >= 0; d--) { int64_t c = rem % g.shape[d]; rem /= g.shape[d]; oa += c * g.sa[d]; ob += c * g.sb[d]; }
      cases++;
      if (oa != ref_off(i, on, os, an, as) || ob != ref_off(i, on, os, bn, bs)) { fails++; break; }
    }
  }
  printf("%d element checks, %d failing cases\n", cases, fails);
  return fails != 0;
}
