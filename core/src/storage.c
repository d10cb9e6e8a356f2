/* storage.c — refcounted storages on a pooled, 64-byte-aligned allocator.
 *
 * Freed blocks go back to a per-device pool in size classes (four steps per power of
 * two, so at most 25% slack) and serve later allocations of the same class. This is
 * what keeps a Lua loop of temporaries at a steady state: the GC frees tensors in
 * bursts, the pool absorbs the churn. */
#include "session.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#define NCLASS 256
/* Pools: 0 = cpu(0), 1..8 = gpu(0..7), then cpu(1)..cpu(MX_MAX_CPU_DEVICES - 1): CPU
 * contexts with distinct ids are distinct devices (each its own pool, so one device's
 * memory statistics and trims are its own); cpu(0)'s index stays 0 for the hot path. */
#ifndef MX_MAX_CPU_DEVICES /* (the same default as device.c; internal.h should own it) */
#define MX_MAX_CPU_DEVICES 16
#endif
#define NGPUPOOL 8
#define NPOOL (1 + NGPUPOOL + MX_MAX_CPU_DEVICES - 1)
#define POOL_LIMIT_DEFAULT ((int64_t)4 << 30)

typedef struct block { struct block *next; void *p; } block;

typedef struct pool {
  pthread_mutex_t mu;
  void *free_list[NCLASS]; /* intrusive singly linked: first word of each block */
  uint32_t demand[NCLASS]; /* allocations per class since the last mx_memory_trim */
  int64_t in_use, pooled, peak, nalloc, hits;
} pool;

static pool pools[NPOOL] = {[0 ... NPOOL - 1] = {.mu = PTHREAD_MUTEX_INITIALIZER}};

static int pool_index(int dev_type, int dev_id) {
  if (dev_type == MX_CPU) {
    if (MX_LIKELY(dev_id == 0)) return 0;
    if (dev_id < 0 || dev_id >= MX_MAX_CPU_DEVICES) return -1;
    return NGPUPOOL + dev_id;
  }
  if (dev_id < 0 || dev_id >= NGPUPOOL) return -1;
  return 1 + dev_id;
}
static bool pool_is_cpu(int i) { return i == 0 || i > NGPUPOOL; }
static int pool_dev_id(int i) { return i == 0 ? 0 : i > NGPUPOOL ? i - NGPUPOOL : i - 1; }

/* Size class: capacities 64, 80, 96, 112, 128, 160, ... (4 steps per octave). */
static int size_class(size_t n, size_t *cap) {
  if (n <= 64) { *cap = 64; return 0; }
  int k = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^k < n <= 2^(k+1) */
  size_t base = (size_t)1 << k, step = base >> 2;
  size_t sub = (n - base + step - 1) / step; /* 1..4 */
  *cap = base + sub * step;
  return (k - 6) * 4 + (int)sub;
}

/* CPU blocks of 4 MB and more are 2 MB aligned and asked for transparent huge pages
 * (where the kernel's THP mode is madvise, nothing else gives them): a stream over
 * large weights (batch-1 decoding reads every weight once a token) read at 10.7-12.2
 * GB/s with them against 8.6-9.3 GB/s on 4 kB pages here. MX_HUGEPAGES=0 turns it off. */
#define HUGE_MIN ((size_t)4 << 20)
#define HUGE_ALIGN ((size_t)2 << 20)
static bool huge_on(void) {
  static _Atomic int on = -1; /* read once; racing first calls agree */
  if (on < 0) {
    const char *e = getenv("MX_HUGEPAGES");
    /* off under a finite address-space limit (`ulimit -v`): glibc keeps the alignment's
     * slack mapped, up to 2 MB a block, and 320 MB ran out (spec/ulimit_spec.lua) */
    struct rlimit rl;
    bool limited = getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
    on = !(e && e[0] == '0') && !limited;
  }
  return on;
}

static void *raw_alloc(size_t cap, int dev_type, int dev_id) {
  if (dev_type == MX_CPU) {
    void *p = NULL;
    bool huge = cap >= HUGE_MIN && huge_on();
    if (posix_memalign(&p, huge ? HUGE_ALIGN : MX_ALIGN, cap) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    if (huge) (void)madvise(p, cap / HUGE_ALIGN * HUGE_ALIGN, MADV_HUGEPAGE);
#endif
    return p;
  }
  const mx_device_backend *b = mx_backend(dev_type);
  return b ? b->alloc(cap, dev_id) : NULL;
}

static void raw_free(void *p, size_t cap, int dev_type, int dev_id) {
  if (dev_type == MX_CPU) { free(p); return; }
  const mx_device_backend *b = mx_backend(dev_type);
  if (b) b->free(p, cap, dev_id);
}

/* GPU blocks cannot hold the free-list link in device memory, so GPU pools keep
 * links in small host nodes; CPU blocks use their first word. */
static void *pool_get(pool *pl, int cls, int dev_type) {
  void *head = pl->free_list[cls];
  if (!head) return NULL;
  if (dev_type == MX_CPU) {
    pl->free_list[cls] = *(void **)head;
    return head;
  }
  block *b = head;
  pl->free_list[cls] = b->next;
  void *p = b->p;
  free(b);
  return p;
}

static bool pool_put(pool *pl, int cls, void *p, int dev_type) {
  if (dev_type == MX_CPU) {
    *(void **)p = pl->free_list[cls];
    pl->free_list[cls] = p;
    return true;
  }
  block *b = malloc(sizeof *b);
  if (!b) return false;
  b->p = p;
  b->next = pl->free_list[cls];
  pl->free_list[cls] = b;
  return true;
}

static int64_t pool_limit(void) {
  static int64_t lim = -1;
  if (lim < 0) {
    const char *e = getenv("MX_POOL_LIMIT_MB");
    lim = e ? (int64_t)atoll(e) << 20 : POOL_LIMIT_DEFAULT;
  }
  return lim;
}

/* Counters are updated with atomics (not under the pool lock) so the cell path below
 * needs no lock at all; readers see a consistent-enough snapshot. */
static inline void stat_add(int64_t *c, int64_t v) { __atomic_add_fetch(c, v, __ATOMIC_RELAXED); }
static inline int64_t stat_get(const int64_t *c) { return __atomic_load_n(c, __ATOMIC_RELAXED); }
static void note_alloc(pool *pl, int64_t cap, bool hit) {
  stat_add(&pl->nalloc, 1);
  if (hit) stat_add(&pl->hits, 1);
  int64_t now = __atomic_add_fetch(&pl->in_use, cap, __ATOMIC_RELAXED);
  int64_t peak = stat_get(&pl->peak);
  while (now > peak &&
         !__atomic_compare_exchange_n(&pl->peak, &peak, now, true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
  }
}

static void storage_init(mx_storage *s, void *p, size_t nbytes, size_t cap, int dev_type,
                         int dev_id, mx_session *se) {
  atomic_init(&s->refcount, 1);
  atomic_init(&s->version, 0);
  mx_storage_touch(s);
  s->data = p;
  s->nbytes = nbytes;
  s->capacity = cap;
  s->dev_type = dev_type;
  s->dev_id = dev_id;
  s->deleter = NULL;
  s->deleter_ctx = NULL;
  s->external = false;
  s->in_cell = false;
  s->shared = false;
  s->version = 0;
  s->engine_var = NULL;
  s->session = se;
  mx_session_charge(se, (int64_t)cap);
}

mx_storage *mx_storage_alloc(size_t nbytes, int dev_type, int dev_id) {
  return mx_storage_alloc_in(mx_session_cur(), nbytes, dev_type, dev_id);
}

mx_storage *mx_storage_alloc_in(mx_session *se, size_t nbytes, int dev_type, int dev_id) {
  int pi = pool_index(dev_type, dev_id);
  if (pi < 0) return NULL;
  mx_storage *s = malloc(sizeof *s);
  if (!s) return NULL;
  size_t cap;
  int cls = size_class(nbytes ? nbytes : 1, &cap);
  pool *pl = &pools[pi];
  pthread_mutex_lock(&pl->mu);
  void *p = NULL;
  if (cls < NCLASS) {
    p = pool_get(pl, cls, dev_type);
    pl->demand[cls]++;
  }
  if (p) stat_add(&pl->pooled, -(int64_t)cap);
  pthread_mutex_unlock(&pl->mu);
  bool hit = p != NULL;
  if (!p) {
    p = raw_alloc(cap, dev_type, dev_id);
    if (!p) { /* give the pool back to the system and try once more */
      mx_memory_empty_cache(dev_type);
      p = raw_alloc(cap, dev_type, dev_id);
    }
    if (!p) { free(s); return NULL; }
  }
  note_alloc(pl, (int64_t)cap, hit);
  storage_init(s, p, nbytes, cap, dev_type, dev_id, se);
  return s;
}

/* ---- cells: small CPU tensors in one block ----------------------------------------
 * A 1-element op would otherwise pay two mallocs, a pool lock and three frees. A
 * cell holds the tensor header, its storage header and up to MX_CELL_BYTES of data;
 * free cells sit on a spinlocked stack (the critical section is two stores). */
_Static_assert(sizeof(struct mx_tensor) + sizeof(mx_storage) <= 192,
               "a cell's header and storage must fit three cache lines (internal.h)");
typedef struct cell {
  union { struct cell *next; struct mx_tensor t; } u;
  mx_storage s;
  _Alignas(MX_ALIGN) char data[MX_CELL_BYTES];
} cell;

static atomic_flag cell_lock = ATOMIC_FLAG_INIT;
static cell *cell_free;    /* under cell_lock */
static int64_t cell_nfree; /* under cell_lock */
/* The cells' share of the CPU pool's statistics, counted under cell_lock (plain adds
 * inside the lock the free list needs anyway: four locked adds per 1-element op fewer
 * than the pool's atomics); mx_memory_get_stats adds them to pool 0's. */
static struct { int64_t in_use, pooled, peak, nalloc, hits; } cst;

static inline void cell_lock_take(void) {
  while (atomic_flag_test_and_set_explicit(&cell_lock, memory_order_acquire)) {
  }
}
static inline void cell_lock_give(void) {
  atomic_flag_clear_explicit(&cell_lock, memory_order_release);
}

struct mx_tensor *mx_cell_alloc(size_t nbytes, mx_session *se) {
  if (nbytes > MX_CELL_BYTES) return NULL;
  cell_lock_take();
  cell *c = cell_free;
  if (c) {
    cell_free = c->u.next;
    cell_nfree--;
    cst.pooled -= MX_CELL_BYTES;
    cst.hits++;
  }
  cst.nalloc++;
  cst.in_use += MX_CELL_BYTES;
  if (cst.in_use > cst.peak) cst.peak = cst.in_use;
  cell_lock_give();
  if (!c) {
    void *p = NULL;
    if (posix_memalign(&p, MX_ALIGN, sizeof(cell)) != 0) {
      cell_lock_take();
      cst.nalloc--;
      cst.in_use -= MX_CELL_BYTES;
      cell_lock_give();
      return NULL;
    }
    c = p;
  }
  storage_init(&c->s, c->data, nbytes, MX_CELL_BYTES, MX_CPU, 0, se);
  c->s.in_cell = true;
  atomic_init(&c->u.t.refcount, 1);
  c->u.t.storage = &c->s;
  return &c->u.t;
}

bool mx_cell_tensor(const struct mx_tensor *t) {
  const mx_storage *s = t->storage;
  return s->in_cell && (const char *)t == (const char *)s - offsetof(cell, s);
}

static void cell_release(mx_storage *s) {
  cell *c = (cell *)((char *)s - offsetof(cell, s));
  int64_t limit = pool_limit();
  cell_lock_take();
  cst.in_use -= MX_CELL_BYTES;
  bool keep = stat_get(&pools[0].pooled) + cst.pooled + MX_CELL_BYTES <= limit;
  if (keep) {
    cst.pooled += MX_CELL_BYTES;
    c->u.next = cell_free;
    cell_free = c;
    cell_nfree++;
  }
  cell_lock_give();
  if (!keep) free(c);
}

static void cells_empty(void) {
  cell_lock_take();
  cell *c = cell_free;
  cell_free = NULL;
  cell_nfree = 0;
  cst.pooled = 0;
  cell_lock_give();
  while (c) {
    cell *next = c->u.next;
    free(c);
    c = next;
  }
}

mx_storage *mx_storage_wrap(void *data, size_t nbytes, void (*deleter)(void *, void *),
                            void *ctx) {
  mx_storage *s = malloc(sizeof *s);
  if (!s) return NULL;
  storage_init(s, data, nbytes, nbytes, MX_CPU, 0, mx_session_cur());
  mx_session_uncharge(s->session, (int64_t)nbytes); /* not our memory: not charged */
  s->session = NULL;
  s->deleter = deleter;
  s->deleter_ctx = ctx;
  s->external = true;
  return s;
}

static atomic_uint version_seq;
void mx_storage_touch(mx_storage *s) {
  atomic_store_explicit(&s->version,
                        atomic_fetch_add_explicit(&version_seq, 1, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

void mx_storage_retain(mx_storage *s) {
  atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed);
}

/* The engine (which creates storages' variables, engine.c) gives the function that frees
 * one before it makes the first: storage.c calls nothing above it. */
static void (*_Atomic var_free)(void *var);
void mx_storage_on_var_free(void (*fn)(void *var)) { atomic_store(&var_free, fn); }

void mx_storage_release(mx_storage *s) {
  if (!s || atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1) return;
  /* Every queued op holds a reference, so nothing is pending on s now: its block can
   * go back to the pool. */
  if (s->engine_var) var_free(s->engine_var);
  if (s->session) mx_session_uncharge(s->session, (int64_t)s->capacity);
  if (s->external) {
    if (s->deleter) s->deleter(s->data, s->deleter_ctx);
    free(s);
    return;
  }
  if (s->in_cell) { cell_release(s); return; }
  int pi = pool_index(s->dev_type, s->dev_id);
  pool *pl = &pools[pi];
  size_t cap;
  int cls = size_class(s->nbytes ? s->nbytes : 1, &cap);
  bool kept = false;
  stat_add(&pl->in_use, -(int64_t)s->capacity);
  pthread_mutex_lock(&pl->mu);
  if (cls < NCLASS && stat_get(&pl->pooled) + (int64_t)cap <= pool_limit() &&
      pool_put(pl, cls, s->data, s->dev_type)) {
    stat_add(&pl->pooled, (int64_t)cap);
    kept = true;
  }
  pthread_mutex_unlock(&pl->mu);
  if (!kept) raw_free(s->data, s->capacity, s->dev_type, s->dev_id);
  free(s);
}

void mx_memory_get_stats(int dev_type, mx_memory_stats *out) {
  memset(out, 0, sizeof *out);
  for (int i = 0; i < NPOOL; i++) {
    if ((dev_type == MX_CPU) != pool_is_cpu(i)) continue;
    pool *pl = &pools[i];
    out->bytes_in_use += stat_get(&pl->in_use);
    out->bytes_pooled += stat_get(&pl->pooled);
    out->peak_bytes += stat_get(&pl->peak);
    out->num_allocs += stat_get(&pl->nalloc);
    out->pool_hits += stat_get(&pl->hits);
  }
  if (dev_type == MX_CPU) {
    cell_lock_take();
    out->bytes_in_use += cst.in_use;
    out->bytes_pooled += cst.pooled;
    out->peak_bytes += cst.peak; /* the two peaks' sum: >= the true combined peak */
    out->num_allocs += cst.nalloc;
    out->pool_hits += cst.hits;
    cell_lock_give();
  }
}

int64_t mx_memory_bytes_in_use(void) { return mx_session_bytes(mx_session_cur()); }

void mx_tensor_adopt(mx_tensor *t, mx_session *to) {
  mx_storage *s = t ? t->storage : NULL;
  if (!s || !s->session || !to || s->session == to) return;
  mx_session *from = s->session;
  mx_session_charge(to, (int64_t)s->capacity);
  s->session = to; /* (the caller owns t and hands it over: no concurrent release) */
  mx_session_uncharge(from, (int64_t)s->capacity);
}

void mx_memory_reset_peak(int dev_type) {
  for (int i = 0; i < NPOOL; i++) {
    if ((dev_type == MX_CPU) != pool_is_cpu(i)) continue;
    __atomic_store_n(&pools[i].peak, stat_get(&pools[i].in_use), __ATOMIC_RELAXED);
  }
  if (dev_type == MX_CPU) {
    cell_lock_take();
    cst.peak = cst.in_use;
    cell_lock_give();
  }
}

/* The capacity of size class c (size_class inverted); 0 for classes no allocation
 * reaches (and 1 << 64 would be UB). */
static size_t class_cap(int c) {
  if (c == 0) return 64;
  int k = (c - 1) / 4 + 6, sub = (c - 1) % 4 + 1;
  if (k > 62) return 0;
  size_t base = (size_t)1 << k;
  return base + (size_t)sub * (base >> 2);
}

/* Frees pool i's blocks: every class (all) or those with no allocation since the
 * last trim; resets the demand counts. */
static void pool_free_blocks(int i, bool all) {
  int dt = pool_is_cpu(i) ? MX_CPU : MX_GPU, id = pool_dev_id(i);
  pool *pl = &pools[i];
  pthread_mutex_lock(&pl->mu);
  for (int c = 0; c < NCLASS; c++) {
    size_t cap = class_cap(c);
    if (cap == 0) break;
    bool idle = pl->demand[c] == 0;
    pl->demand[c] = 0;
    if (!all && !idle) continue;
    void *p;
    while ((p = pool_get(pl, c, dt)) != NULL) {
      raw_free(p, cap, dt, id);
      stat_add(&pl->pooled, -(int64_t)cap);
    }
  }
  pthread_mutex_unlock(&pl->mu);
}

void mx_memory_empty_cache(int dev_type) {
  for (int i = 0; i < NPOOL; i++) {
    if ((dev_type == MX_CPU) != pool_is_cpu(i)) continue;
    pool_free_blocks(i, true);
    if (i == 0) cells_empty();
  }
}

void mx_memory_trim(int dev_type) {
  for (int i = 0; i < NPOOL; i++) {
    if ((dev_type == MX_CPU) != pool_is_cpu(i)) continue;
    pool_free_blocks(i, false);
  }
}

/* When libmx is unloaded (LuaJIT unloads it as its state closes) the pools' free
 * lists die with our statics: give the blocks back so leak checkers see a clean
 * exit. The engine's workers are joined by then (its atexit handler runs first). */
__attribute__((destructor)) static void pools_free_at_unload(void) {
  mx_memory_empty_cache(MX_CPU);
}
