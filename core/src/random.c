/* random.c — a counter-based generator: element i of a draw is a pure function of
 * (seed, counter + i), so results do not depend on thread count or scheduling. */
#include "internal.h"

static _Atomic uint64_t rng_seed = 0x853c49e6748fea9bULL;
static _Atomic uint64_t rng_counter = 0;

void mx_random_seed(uint64_t seed) {
  atomic_store(&rng_seed, seed);
  atomic_store(&rng_counter, 0);
}

/* Reserve n consecutive counters; returns the first. */
uint64_t mx_random_reserve(uint64_t n, uint64_t *seed) {
  *seed = atomic_load(&rng_seed);
  return atomic_fetch_add(&rng_counter, n);
}

uint64_t mx_random_reserve_counters(uint64_t n, uint64_t *seed) {
  return mx_random_reserve(n, seed);
}

uint64_t mx_random_next(void) {
  uint64_t s, c = mx_random_reserve(1, &s);
  return mx_random_bits(s, c);
}
