/* profiler.h — the engine's hooks into the op profiler (profiler.c); not installed. */
#ifndef MX_PROFILER_H
#define MX_PROFILER_H

#include "internal.h"

extern atomic_bool mx_profiler_running;

/* One relaxed load: the only cost of the profiler while it is stopped. */
static inline bool mx_profiler_on(void) {
  return atomic_load_explicit(&mx_profiler_running, memory_order_relaxed);
}
/* Monotonic clock in ns, never 0. */
int64_t mx_profiler_now(void);
/* Record one op run: name must be static (op table names are). async: ran on an
 * engine worker rather than inline on the caller's thread. Thread-safe. */
void mx_profiler_record(const char *name, int64_t t0, int64_t t1, bool async);

#endif /* MX_PROFILER_H */
