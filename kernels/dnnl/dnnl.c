/* kernels/dnnl/dnnl.c — the one owner of oneDNN's engine, per-thread streams and
 * primitive cache (dnnl.h), and of the oneDNN blocked layout (MX_LAYOUT_ONEDNN:
 * layout_md is a malloc'd dnnl_memory_desc_t; the storage is dnnl_memory_desc_get_size
 * bytes, padding included), which it registers with the core (mx_layout_register). The
 * MX_BACKEND_DNNL kernels are in the family files beside it (conv.c, pool.c, norm.c,
 * nn.c, elemwise.c, reduce.c, linalg.c), declared in the op table. */
#include "dnnl.h"

#ifdef MX_HAVE_ONEDNN
#include "engine.h"
#include "layout.h"
#include "mx_ops_gen.h"

#include <oneapi/dnnl/dnnl_debug.h>
#include <pthread.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

/* ---- engine and streams ------------------------------------------------------------ */

static dnnl_engine_t eng;
static pthread_once_t eng_once = PTHREAD_ONCE_INIT;
static pthread_key_t stream_key;

static void stream_free(void *s) { dnnl_stream_destroy(s); }
static void eng_init(void) {
  if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success) eng = NULL;
  pthread_key_create(&stream_key, stream_free);
}

static bool dnnl_ready(void);
dnnl_engine_t mx_dnnl_engine(void) { return dnnl_ready() ? eng : NULL; }

dnnl_cpu_isa_t mx_dnnl_isa(void) {
  static _Atomic int isa = -1; /* a race only reads it twice */
  int v = isa;
  if (v < 0) isa = v = (int)dnnl_get_effective_cpu_isa();
  return (dnnl_cpu_isa_t)v;
}

dnnl_stream_t mx_dnnl_stream(void) {
  if (!mx_dnnl_engine()) return NULL;
  dnnl_stream_t s = pthread_getspecific(stream_key);
  if (!s) {
    if (dnnl_stream_create(&s, eng, dnnl_stream_default_flags) != dnnl_success) return NULL;
    pthread_setspecific(stream_key, s);
  }
  return s;
}

int mx_dnnl_team_begin(double flops, int *prev) {
  int nt = 1;
#ifdef _OPENMP
  int cap = (int)(flops / MX_DNNL_FLOPS_PER_THREAD);
  /* a grant of 1 holds nothing; mx_dnnl_team_end returns what was taken */
  nt = omp_in_parallel() || cap <= 1 ? 1 : mx_threads_acquire(cap > 64 ? 64 : cap);
  *prev = omp_get_max_threads();
  if (nt != *prev) omp_set_num_threads(nt);
  mx_parallel_start_team(nt);
  /* fewer threads could be created (parallel.c lowered the setting): the team is what
   * there is; the budget taken goes back in full */
  int got = omp_get_max_threads();
  if (got < nt) {
    mx_threads_release(nt);
    nt = got > 1 ? mx_threads_acquire(got) : 1;
    if (nt != got) omp_set_num_threads(nt);
  }
#else
  (void)flops;
  *prev = 1;
#endif
  return nt;
}

void mx_dnnl_team_end(int nt, int prev) {
#ifdef _OPENMP
  if (nt > 1) mx_threads_release(nt);
  if (omp_get_max_threads() != prev) omp_set_num_threads(prev);
#else
  (void)nt, (void)prev;
#endif
}

/* The exit drain must be registered after oneDNN registers its statics' destructors
 * (atexit runs in reverse order). Those statics (the sgemm JIT kernels) appear during
 * the first sgemm: a small warm-up sgemm creates them here, before the caller's real
 * call, and the drain is registered right after it, so a script that ends while a
 * worker is inside a long sgemm drains before the JIT code is freed. */
static void first_use(void) {
  static float a[64 * 64], c[64 * 64];
  /* on one thread: the warm-up must not open an OpenMP team of its own (a team grows
   * only through parallel.c, which copes with threads that cannot be created) */
#ifdef _OPENMP
  int prev = omp_get_max_threads();
  omp_set_num_threads(1);
#endif
  dnnl_sgemm('N', 'N', 64, 64, 64, 1.0f, a, 64, a, 64, 0.0f, c, 64);
#ifdef _OPENMP
  omp_set_num_threads(prev);
#endif
  mx_engine_register_exit();
}

/* oneDNN does not survive running out of address space during its first use (the
 * engine, the warm-up's JIT kernels): a failed JIT buffer is written through
 * (SIGSEGV) or throws through pthread_once, where glibc's unwinder then aborts for want of
 * memory to load libgcc_s. So FIRST_USE_ROOM of address space is reserved when libmx
 * loads (PROT_NONE: no memory) and given back just before the first use, which then has
 * it whatever the other threads took meanwhile (under `ulimit -v` the engine workers'
 * stacks and malloc arenas, 72 MB each, come and go); without the reservation, the first
 * use waits until that much can be mapped, and oneDNN is "not there" until then
 * (mx_dnnl_engine NULL: callers take their other path; the next call tries again). Once
 * ready, always ready. Measured (AVX-512 JIT, oneDNN 2.6): the first use crashed with 4 MB
 * of address space left and passed with 8; the room is twice that. */
#define FIRST_USE_ROOM ((size_t)16 << 20)
static pthread_mutex_t ready_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int ready_state; /* 0 not yet, 1 ready, -1 no engine (for good) */
static void *first_use_room;    /* the reservation, under ready_mu; NULL once given back */

static void *map_room(void) {
  void *p = mmap(NULL, FIRST_USE_ROOM, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static bool dnnl_ready(void) {
  int st = atomic_load_explicit(&ready_state, memory_order_acquire);
  if (MX_LIKELY(st != 0)) return st > 0;
  pthread_mutex_lock(&ready_mu);
  st = atomic_load(&ready_state);
  if (st == 0) {
    void *p = first_use_room ? first_use_room : map_room();
    first_use_room = NULL;
    if (p) {
      munmap(p, FIRST_USE_ROOM);
      pthread_once(&eng_once, eng_init);
      if (eng) first_use();
      st = eng ? 1 : -1;
      atomic_store_explicit(&ready_state, st, memory_order_release);
    }
  }
  pthread_mutex_unlock(&ready_mu);
  return st > 0;
}
bool mx_dnnl_note_use(void) { return dnnl_ready(); }

/* ---- the primitive cache ------------------------------------------------------------
 * MX_DNNL_CACHE entries found through a hash of (kind, key) in NBUCKET chains: a compiled
 * graph's primitives all stay (DenseNet-121 has ~200 distinct ones: an LRU of 64 rebuilt
 * a third of them on every run). A miss builds outside the table's lock, with the new
 * entry held: other keys' lookups go on meanwhile. */
#define NBUCKET 1024

struct mx_dnnl_entry {
  int kind;
  size_t keylen;
  void *key;             /* NULL: empty slot */
  void *obj;
  void (*destroy)(void *);
  uint64_t stamp;        /* last use, for LRU eviction */
  uint32_t hash;
  int next;              /* the chain of its bucket, -1 */
  pthread_mutex_t mu;    /* held while a caller uses obj */
};

static mx_dnnl_entry cache[MX_DNNL_CACHE];
static int bucket[NBUCKET];
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t cache_clock;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static pthread_once_t built_once = PTHREAD_ONCE_INIT;

static void cache_init(void) {
  for (int i = 0; i < MX_DNNL_CACHE; i++) {
    pthread_mutex_init(&cache[i].mu, NULL);
    cache[i].next = -1;
  }
  for (int b = 0; b < NBUCKET; b++) bucket[b] = -1;
}

static uint32_t key_hash(int kind, const void *key, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)kind;
  const unsigned char *p = key;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return (uint32_t)(h ^ (h >> 32));
}

/* unlinks entry i from its bucket's chain (under cache_mu) */
static void unlink_entry(int i) {
  int *at = &bucket[cache[i].hash % NBUCKET];
  while (*at >= 0 && *at != i) at = &cache[*at].next;
  if (*at == i) *at = cache[i].next;
  cache[i].next = -1;
}

static void entry_clear(mx_dnnl_entry *e) {
  if (e->obj && e->destroy) e->destroy(e->obj);
  free(e->key);
  e->key = e->obj = NULL;
}

static void register_again(void) { mx_engine_register_exit(); }

void *mx_dnnl_cache_get(int kind, const void *key, size_t keylen,
                        void *(*build)(const void *key, void *arg), void (*destroy)(void *),
                        void *arg, mx_dnnl_entry **entry) {
  pthread_once(&cache_once, cache_init);
  *entry = NULL;
  if (!mx_dnnl_engine()) return NULL;
  mx_dnnl_note_use();
  uint32_t h = key_hash(kind, key, keylen);
  pthread_mutex_lock(&cache_mu);
  for (int i = bucket[h % NBUCKET]; i >= 0; i = cache[i].next) {
    mx_dnnl_entry *c = &cache[i];
    if (c->hash != h || c->kind != kind || c->keylen != keylen || memcmp(c->key, key, keylen))
      continue;
    c->stamp = ++cache_clock;
    bool got = pthread_mutex_trylock(&c->mu) == 0;
    pthread_mutex_unlock(&cache_mu);
    if (!got) return NULL;
    *entry = c;
    return c->obj;
  }
  /* a miss: an empty slot, else the least recently used one not in use */
  int v = -1;
  for (int i = 0; i < MX_DNNL_CACHE; i++) {
    if (!cache[i].key) {
      if (pthread_mutex_trylock(&cache[i].mu) != 0) continue; /* being built */
      if (v >= 0) pthread_mutex_unlock(&cache[v].mu);
      v = i;
      break;
    }
    if (v < 0 || cache[i].stamp < cache[v].stamp) {
      if (pthread_mutex_trylock(&cache[i].mu) != 0) continue;
      if (v >= 0) pthread_mutex_unlock(&cache[v].mu);
      v = i;
    }
  }
  if (v < 0) { /* every entry in use: no cache this time */
    pthread_mutex_unlock(&cache_mu);
    return NULL;
  }
  mx_dnnl_entry *victim = &cache[v];
  if (victim->key) unlink_entry(v);
  void *old_obj = victim->obj, *old_key = victim->key;
  void (*old_destroy)(void *) = victim->destroy;
  victim->key = victim->obj = NULL; /* empty and held: invisible to lookups */
  pthread_mutex_unlock(&cache_mu);
  if (old_obj && old_destroy) old_destroy(old_obj);
  free(old_key);
  void *k = malloc(keylen);
  void *obj = k ? build(key, arg) : NULL;
  if (!obj) {
    free(k);
    pthread_mutex_unlock(&victim->mu);
    return NULL;
  }
  memcpy(k, key, keylen);
  pthread_mutex_lock(&cache_mu);
  victim->kind = kind;
  victim->keylen = keylen;
  victim->key = k;
  victim->obj = obj;
  victim->destroy = destroy;
  victim->hash = h;
  victim->stamp = ++cache_clock;
  victim->next = bucket[h % NBUCKET];
  bucket[h % NBUCKET] = v;
  pthread_mutex_unlock(&cache_mu);
  pthread_once(&built_once, register_again); /* primitive creation may add statics */
  *entry = victim;
  return obj;
}

void mx_dnnl_cache_put(mx_dnnl_entry *e) {
  if (e) pthread_mutex_unlock(&e->mu);
}

/* The cached primitives go when libmx is unloaded (leak checkers see a clean exit). */
__attribute__((destructor)) static void cache_free_at_unload(void) {
  for (int i = 0; i < MX_DNNL_CACHE; i++) entry_clear(&cache[i]);
  if (eng) dnnl_engine_destroy(eng);
  eng = NULL;
}

/* A cached primitive, or (busy entry) a fresh one the caller destroys: kernels that
 * have no other path than oneDNN's must not fail because another thread holds the
 * entry. *tmp says which. */
static void prim_destroy(void *p) { dnnl_primitive_destroy(p); }
dnnl_primitive_t mx_dnnl_prim_get(int kind, const void *key, size_t keylen,
                                  void *(*build)(const void *, void *), mx_dnnl_entry **e,
                                  bool *tmp) {
  dnnl_primitive_t p = mx_dnnl_cache_get(kind, key, keylen, build, prim_destroy,
                                         NULL, e);
  *tmp = p == NULL;
  if (!p && mx_dnnl_engine()) p = build(key, NULL);
  return p;
}
void mx_dnnl_prim_put(dnnl_primitive_t p, mx_dnnl_entry *e, bool tmp) {
  if (tmp && p) dnnl_primitive_destroy(p);
  else mx_dnnl_cache_put(e);
}

/* ---- reorders ------------------------------------------------------------------------ */

static void *reorder_build(const void *key, void *arg) {
  (void)arg;
  const dnnl_memory_desc_t *md = key;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_t p = NULL;
  if (dnnl_reorder_primitive_desc_create(&pd, &md[0], eng, &md[1], eng, NULL) == dnnl_success &&
      dnnl_primitive_create(&p, pd) != dnnl_success)
    p = NULL;
  if (pd) dnnl_primitive_desc_destroy(pd);
  return p;
}

int mx_dnnl_exec2(dnnl_primitive_t p, int arg_src, const dnnl_memory_desc_t *smd,
                  const void *src, const dnnl_memory_desc_t *dmd, void *dst) {
  dnnl_memory_t ms = NULL, md = NULL;
  dnnl_stream_t s = mx_dnnl_stream();
  bool ok = s && dnnl_memory_create(&ms, smd, eng, (void *)src) == dnnl_success &&
            dnnl_memory_create(&md, dmd, eng, dst) == dnnl_success;
  if (ok) {
    dnnl_exec_arg_t args[2] = {{arg_src, ms}, {DNNL_ARG_DST, md}};
    ok = dnnl_primitive_execute(p, s, 2, args) == dnnl_success &&
         dnnl_stream_wait(s) == dnnl_success;
  }
  if (ms) dnnl_memory_destroy(ms);
  if (md) dnnl_memory_destroy(md);
  return ok ? MX_OK : mx_err(MX_EINVAL, "onednn: primitive execution failed");
}

int mx_dnnl_reorder(const dnnl_memory_desc_t *src_md, const void *src,
                    const dnnl_memory_desc_t *dst_md, void *dst) {
  dnnl_memory_desc_t key[2];
  memcpy(&key[0], src_md, sizeof key[0]);
  memcpy(&key[1], dst_md, sizeof key[1]);
  mx_dnnl_entry *e;
  bool tmp;
  dnnl_primitive_t p = mx_dnnl_prim_get(MX_DNNL_REORDER, key, sizeof key, reorder_build, &e, &tmp);
  if (!p) return mx_err(MX_EINVAL, "onednn: no reorder between these layouts");
  int rc = mx_dnnl_exec2(p, DNNL_ARG_FROM, src_md, src, dst_md, dst);
  mx_dnnl_prim_put(p, e, tmp);
  if (!rc) mx_layout_note_reorder();
  return rc;
}

/* ---- zero padding -------------------------------------------------------------------- */

/* The element offset of logical index i (in padded dims) in blocked descriptor md:
 * outer blocks by the strides, inner blocks (outermost first) packed densely. */
static int64_t blocked_off(const dnnl_memory_desc_t *md, const int64_t *i) {
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  int64_t blk[DNNL_MAX_NDIMS], off = md->offset0, in = 0;
  for (int d = 0; d < md->ndims; d++) blk[d] = 1;
  for (int k = 0; k < b->inner_nblks; k++) blk[b->inner_idxs[k]] *= b->inner_blks[k];
  for (int d = 0; d < md->ndims; d++) off += i[d] / blk[d] * b->strides[d];
  for (int k = 0; k < b->inner_nblks; k++) { /* the block's index within its dim's blocks */
    int d = (int)b->inner_idxs[k];
    int64_t below = 1;
    for (int j = k + 1; j < b->inner_nblks; j++)
      if (b->inner_idxs[j] == d) below *= b->inner_blks[j];
    in = in * b->inner_blks[k] + i[d] / below % b->inner_blks[k];
  }
  return off + in;
}

int mx_dnnl_zero_pad(const dnnl_memory_desc_t *md, void *data) {
  if (md->format_kind != dnnl_blocked) return MX_OK;
  size_t es = dnnl_data_type_size(md->data_type);
  int n = md->ndims;
  /* the padding is the set of indices with some i[d] >= dims[d]; split by the first such
   * d (p): i[e] < dims[e] for e < p, dims[p] <= i[p] < padded[p], any i[e] for e > p */
  for (int p = 0; p < n; p++) {
    if (md->padded_dims[p] <= md->dims[p]) continue;
    int64_t lo[DNNL_MAX_NDIMS], hi[DNNL_MAX_NDIMS], i[DNNL_MAX_NDIMS];
    bool empty = false;
    for (int e = 0; e < n; e++) {
      lo[e] = e == p ? md->dims[p] : 0;
      hi[e] = e < p ? md->dims[e] : md->padded_dims[e];
      empty = empty || lo[e] >= hi[e];
      i[e] = lo[e];
    }
    if (empty) continue;
    for (;;) {
      memset((char *)data + (size_t)blocked_off(md, i) * es, 0, es);
      int e = n - 1;
      while (e >= 0 && ++i[e] == hi[e]) i[e] = lo[e], e--;
      if (e < 0) break;
    }
  }
  return MX_OK;
}

static int dnnl_dt(int dtype) {
  switch (dtype) {
  case MX_F32: return dnnl_f32;
  case MX_F16: return dnnl_f16;
  case MX_BF16: return dnnl_bf16;
  case MX_I32: return dnnl_s32;
  case MX_I8: return dnnl_s8;
  case MX_U8: return dnnl_u8;
  default: return dnnl_data_type_undef;
  }
}

int mx_dnnl_plain_md(dnnl_memory_desc_t *md, int ndim, const int64_t *shape, int dtype) {
  dnnl_dims_t dims, strides;
  int64_t st = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    dims[i] = shape[i];
    strides[i] = st;
    st *= shape[i] ? shape[i] : 1;
  }
  memset(md, 0, sizeof *md);
  return dnnl_memory_desc_init_by_strides(md, ndim, dims, dnnl_dt(dtype), strides) ==
                 dnnl_success
             ? MX_OK
             : mx_err(MX_EINVAL, "onednn: no descriptor for this shape");
}

/* ---- the blocked layout -------------------------------------------------------------- */

/* The row-major descriptor of t's memory: t's shape, or, when the layout's dims split a
 * dim of t's (grouped convolution weights: (G, F/G, ...) of a (F, ...) tensor, the same
 * row-major memory), those dims. */
static int plain_of(const mx_tensor *t, const dnnl_memory_desc_t *lmd, dnnl_memory_desc_t *pm) {
  if (lmd->ndims == t->ndim) return mx_dnnl_plain_md(pm, t->ndim, t->shape, t->dtype);
  int64_t d[DNNL_MAX_NDIMS];
  for (int i = 0; i < lmd->ndims; i++) d[i] = lmd->dims[i];
  return mx_dnnl_plain_md(pm, lmd->ndims, d, t->dtype);
}

static int blocked_to_row_major(const mx_tensor *src, mx_tensor *dst) {
  dnnl_memory_desc_t pm;
  int rc = plain_of(dst, src->layout_md, &pm);
  if (rc) return rc;
  return mx_dnnl_reorder(src->layout_md, mx_ptr(src), &pm, mx_ptr(dst));
}

static int blocked_from_row_major(const mx_tensor *src, mx_tensor *dst) {
  dnnl_memory_desc_t pm;
  int rc = plain_of(src, dst->layout_md, &pm);
  if (rc) return rc;
  return mx_dnnl_reorder(&pm, mx_ptr(src), dst->layout_md, mx_ptr(dst));
}

static bool blocked_same_md(const void *a, const void *b) {
  return dnnl_memory_desc_equal(a, b) != 0;
}

/* part's place in whole (mx_layout.slice_offset): both blocked alike (the same inner
 * blocks, no padding offsets), the dims but axis equal, and whole's stride equal to part's
 * on every dim where part has more than one outer index (a batch of 1 may differ); a
 * blocked axis needs off and part's extent in whole blocks, so its blocks are whole's. */
static int64_t blocked_slice_offset(const void *wv, const void *pv, int axis, int64_t off) {
  const dnnl_memory_desc_t *w = wv, *p = pv;
  if (w->format_kind != dnnl_blocked || p->format_kind != dnnl_blocked || w->ndims != p->ndims ||
      w->data_type != p->data_type || axis < 0 || axis >= w->ndims || w->offset0 || p->offset0 ||
      w->extra.flags || p->extra.flags)
    return -1;
  const dnnl_blocking_desc_t *wb = &w->format_desc.blocking, *pb = &p->format_desc.blocking;
  if (wb->inner_nblks != pb->inner_nblks) return -1;
  int64_t blk[DNNL_MAX_NDIMS];
  for (int d = 0; d < w->ndims; d++) blk[d] = 1;
  for (int i = 0; i < wb->inner_nblks; i++) {
    if (wb->inner_blks[i] != pb->inner_blks[i] || wb->inner_idxs[i] != pb->inner_idxs[i]) return -1;
    blk[wb->inner_idxs[i]] *= wb->inner_blks[i];
  }
  for (int d = 0; d < w->ndims; d++) {
    if (w->padded_offsets[d] || p->padded_offsets[d]) return -1;
    if (d != axis && (w->dims[d] != p->dims[d] || w->padded_dims[d] != p->padded_dims[d])) return -1;
    if (p->padded_dims[d] / blk[d] > 1 && wb->strides[d] != pb->strides[d]) return -1;
  }
  if (off < 0 || off % blk[axis] || p->padded_dims[axis] != p->dims[axis] ||
      p->dims[axis] % blk[axis] || off + p->dims[axis] > w->dims[axis])
    return -1;
  return off / blk[axis] * wb->strides[axis] * (int64_t)dnnl_data_type_size(w->data_type);
}

static int blocked_to_format(mx_tensor *t, const char *format, mx_tensor **out);
static const mx_layout blocked = {"onednn",       MX_LAYOUT_ONEDNN, blocked_to_row_major,
                                  blocked_from_row_major, blocked_to_format, free,
                                  blocked_same_md, blocked_slice_offset};

bool mx_dnnl_is_blocked(const mx_tensor *t) { return t->layout == &blocked; }

/* The layout is oneDNN's to register: the core converts through its hooks. */
__attribute__((constructor)) static void blocked_register(void) {
  mx_layout_register(&blocked);
  /* Under a finite address-space limit (`ulimit -v`) oneDNN's first use happens now,
   * before any engine worker or team thread exists to take the room while it runs (~30 ms
   * of JIT; an AVX-512 EPYC crashed there at 320 MB with the workers starting teams beside
   * it); with no limit only the reservation is made, and the first use waits for need. */
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) dnnl_ready();
  else first_use_room = map_room();
}

int mx_dnnl_new_blocked(int ndim, const int64_t *shape, int dtype, const dnnl_memory_desc_t *md,
                        mx_tensor **out) {
  dnnl_memory_desc_t *m = malloc(sizeof *m);
  if (!m) return mx_err(MX_ENOMEM, "out of host memory for a layout descriptor");
  memcpy(m, md, sizeof *m);
  int rc = mx_tensor_new_laid(ndim, shape, dtype, dnnl_memory_desc_get_size(m), &blocked, m, out);
  if (rc) free(m);
  return rc;
}

int mx_dnnl_new_like(const mx_tensor *t, const dnnl_memory_desc_t *md, mx_tensor **out) {
  return mx_dnnl_new_blocked(t->ndim, t->shape, t->dtype, md, out);
}

static int blocked_to_format(mx_tensor *t, const char *format, mx_tensor **out) {
  if (!mx_dnnl_engine()) return mx_err(MX_EINVAL, "to_layout: oneDNN has no CPU engine");
  if (t->dtype != MX_F32 || t->ndim < 1 || t->ndim > DNNL_MAX_NDIMS || mx_dev(t) != MX_CPU)
    return mx_err(MX_EINVAL, "to_layout: the oneDNN layout takes float32 cpu tensors of 1 to "
                  "%d dims", DNNL_MAX_NDIMS);
  /* dnnl_fmt_tag2str names each tag value by its canonical name ("aBcd16b"); the
   * common aliases (several names share a value) map onto those */
  static const char *const alias[][2] = {
      {"nc", "ab"},           {"ncw", "abc"},         {"nwc", "acb"},
      {"nchw", "abcd"},       {"nhwc", "acdb"},       {"ncdhw", "abcde"},
      {"ndhwc", "acdeb"},     {"nCw4c", "aBc4b"},     {"nCw8c", "aBc8b"},
      {"nCw16c", "aBc16b"},   {"nChw4c", "aBcd4b"},   {"nChw8c", "aBcd8b"},
      {"nChw16c", "aBcd16b"}, {"nCdhw8c", "aBcde8b"}, {"nCdhw16c", "aBcde16b"},
      {"oihw", "abcd"},       {"OIhw8i8o", "ABcd8b8a"}, {"OIhw16i16o", "ABcd16b16a"},
  };
  const char *name = format;
  for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
    if (strcmp(format, alias[i][0]) == 0) name = alias[i][1];
  int tag = 0;
  for (int f = 1; f < (int)dnnl_format_tag_last && !tag; f++) {
    const char *n = dnnl_fmt_tag2str((dnnl_format_tag_t)f);
    if (n && strcmp(n, name) == 0) tag = f;
  }
  dnnl_dims_t dims;
  for (int i = 0; i < t->ndim; i++) dims[i] = t->shape[i];
  dnnl_memory_desc_t md;
  memset(&md, 0, sizeof md);
  if (!tag || dnnl_memory_desc_init_by_tag(&md, t->ndim, dims, dnnl_f32,
                                           (dnnl_format_tag_t)tag) != dnnl_success)
    return mx_err(MX_EINVAL, "to_layout: unknown oneDNN format '%s' for a %d-d tensor", format,
                  t->ndim);
  mx_tensor *p, *o;
  int rc = mx_tensor_plain(t, &p); /* waits for t's pending writes */
  if (rc) return rc;
  if ((rc = mx_engine_wait_storage(p->storage, true)) || (rc = mx_dnnl_new_like(t, &md, &o))) {
    mx_tensor_release(p);
    return rc;
  }
  dnnl_memory_desc_t pm;
  if (!(rc = mx_dnnl_plain_md(&pm, t->ndim, t->shape, t->dtype)))
    rc = mx_dnnl_reorder(&pm, mx_ptr(p), &md, mx_ptr(o));
  mx_tensor_release(p);
  if (rc) { mx_tensor_release(o); return rc; }
  *out = o;
  return MX_OK;
}

#endif /* MX_HAVE_ONEDNN */
typedef int mx_onednn_c_not_empty; /* ISO C: no empty translation unit */
