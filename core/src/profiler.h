/* profiler.h — the engine's hooks into the op profiler (profiler.c); not installed. The
 * profiler is a passive sink: the engine hands it events, it calls nothing back. */
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
 * engine worker rather than inline on the caller's thread; worker: the recording thread
 * is an engine worker (the trace names its threads by it). Thread-safe. */
void mx_profiler_record(const char *name, int64_t t0, int64_t t1, bool async, bool worker);

#endif /* MX_PROFILER_H */
