/* kernels/cpu/fused.c — the fused elementwise interpreter: a program of float32 unary,
 * binary and scalar ops (graph.h's mx_fused_prog) run over the output in chunks, each
 * instruction a vectorised loop over the chunk, so a chain of k ops reads its inputs and
 * writes its output once instead of k times.
 *
 * Layout: row-major float32; out (the broadcast shape) is written contiguously; an
 * input of the output's size is read in place, a 1-element input is a constant, any
 * other input is gathered per chunk through broadcast strides (0 on its size-1 dims). */
#include "graph.h"
#include "vmath.h"

#include <math.h>
#include <string.h>

enum { CH = 256 };   /* elements per chunk: registers of 32 x 1 KB stay in L1/L2 */
enum { IN_FULL, IN_SCALAR, IN_BCAST };

typedef struct fused_ctx {
  const mx_fused_prog *p;
  int nd;
  int64_t shape[MX_MAX_DIM];
  const float *src[MX_FUSED_MAX];
  int mode[MX_FUSED_MAX];
  int64_t stride[MX_FUSED_MAX][MX_MAX_DIM];
  float *out;
} fused_ctx;

/* Input i's elements b..b+n of the broadcast iteration into dst. */
static void gather(const fused_ctx *c, int i, int64_t b, int64_t n, float *restrict dst) {
  int64_t coord[MX_MAX_DIM];
  int64_t r = b;
  for (int d = c->nd - 1; d >= 0; d--) {
    coord[d] = c->shape[d] ? r % c->shape[d] : 0;
    r = c->shape[d] ? r / c->shape[d] : 0;
  }
  int64_t off = 0;
  for (int d = 0; d < c->nd; d++) off += coord[d] * c->stride[i][d];
  const float *s = c->src[i];
  int last = c->nd - 1;
  for (int64_t j = 0; j < n; j++) {
    dst[j] = s[off];
    /* next coordinate: odometer from the last dim */
    for (int d = last; d >= 0; d--) {
      off += c->stride[i][d];
      if (++coord[d] < c->shape[d]) break;
      off -= coord[d] * c->stride[i][d];
      coord[d] = 0;
    }
  }
}

static HEAVY void unary(int code, int64_t n, const float *restrict a, float *restrict o) {
  switch (code) {
  case MX_FOP_NEG: for (int64_t j = 0; j < n; j++) o[j] = -a[j]; break;
  case MX_FOP_ABS: for (int64_t j = 0; j < n; j++) o[j] = fabsf(a[j]); break;
  case MX_FOP_SQUARE: for (int64_t j = 0; j < n; j++) o[j] = a[j] * a[j]; break;
  case MX_FOP_RELU: for (int64_t j = 0; j < n; j++) o[j] = a[j] <= 0 ? 0.0f : a[j]; break;
  case MX_FOP_SQRT: for (int64_t j = 0; j < n; j++) o[j] = sqrtf(a[j]); break;
  case MX_FOP_RSQRT: for (int64_t j = 0; j < n; j++) o[j] = 1.0f / sqrtf(a[j]); break;
  case MX_FOP_RECIP: for (int64_t j = 0; j < n; j++) o[j] = 1.0f / a[j]; break;
  case MX_FOP_EXP: for (int64_t j = 0; j < n; j++) o[j] = v_expf(a[j]); break;
  case MX_FOP_LOG: for (int64_t j = 0; j < n; j++) o[j] = v_logf(a[j]); break;
  case MX_FOP_TANH: for (int64_t j = 0; j < n; j++) o[j] = v_tanhf(a[j]); break;
  case MX_FOP_SIGMOID: for (int64_t j = 0; j < n; j++) o[j] = 1.0f / (1.0f + v_expf(-a[j])); break;
  case MX_FOP_SIN: for (int64_t j = 0; j < n; j++) o[j] = v_sinf(a[j]); break;
  case MX_FOP_COS: for (int64_t j = 0; j < n; j++) o[j] = v_cosf(a[j]); break;
  case MX_FOP_ERF: for (int64_t j = 0; j < n; j++) o[j] = v_erff(a[j]); break;
  case MX_FOP_LOG1P: for (int64_t j = 0; j < n; j++) o[j] = v_log1pf(a[j]); break;
  case MX_FOP_EXPM1: for (int64_t j = 0; j < n; j++) o[j] = v_expm1f(a[j]); break;
  case MX_FOP_SOFTRELU:
    for (int64_t j = 0; j < n; j++)
      o[j] = (a[j] > 0 ? a[j] : 0.0f) + v_log1pf(v_expf(-fabsf(a[j])));
    break;
  case MX_FOP_SOFTSIGN: for (int64_t j = 0; j < n; j++) o[j] = a[j] / (1.0f + fabsf(a[j])); break;
  default: break;
  }
}

/* NaN-propagating max/min as the elementwise kernels (MXNet) */
#define FMAX(x, y) ((x) != (x) ? (x) : (x) >= (y) ? (x) : (y))
#define FMIN(x, y) ((x) != (x) ? (x) : (x) <= (y) ? (x) : (y))

static HEAVY void binary(int code, int64_t n, const float *restrict a, const float *restrict b,
                         float *restrict o) {
  switch (code) {
  case MX_FOP_ADD: for (int64_t j = 0; j < n; j++) o[j] = a[j] + b[j]; break;
  case MX_FOP_SUB: for (int64_t j = 0; j < n; j++) o[j] = a[j] - b[j]; break;
  case MX_FOP_MUL: for (int64_t j = 0; j < n; j++) o[j] = a[j] * b[j]; break;
  case MX_FOP_DIV: for (int64_t j = 0; j < n; j++) o[j] = a[j] / b[j]; break;
  case MX_FOP_MAX: for (int64_t j = 0; j < n; j++) o[j] = FMAX(a[j], b[j]); break;
  case MX_FOP_MIN: for (int64_t j = 0; j < n; j++) o[j] = FMIN(a[j], b[j]); break;
  case MX_FOP_POW: for (int64_t j = 0; j < n; j++) o[j] = v_powf(a[j], b[j]); break;
  default: break;
  }
}

static HEAVY void scalar(int code, int64_t n, const float *restrict a, float s, float *restrict o) {
  switch (code) {
  case MX_FOP_ADDS: for (int64_t j = 0; j < n; j++) o[j] = a[j] + s; break;
  case MX_FOP_SUBS: for (int64_t j = 0; j < n; j++) o[j] = a[j] - s; break;
  case MX_FOP_RSUBS: for (int64_t j = 0; j < n; j++) o[j] = s - a[j]; break;
  case MX_FOP_MULS: for (int64_t j = 0; j < n; j++) o[j] = a[j] * s; break;
  case MX_FOP_DIVS: for (int64_t j = 0; j < n; j++) o[j] = a[j] / s; break;
  case MX_FOP_RDIVS: for (int64_t j = 0; j < n; j++) o[j] = s / a[j]; break;
  case MX_FOP_MAXS: for (int64_t j = 0; j < n; j++) o[j] = FMAX(a[j], s); break;
  case MX_FOP_MINS: for (int64_t j = 0; j < n; j++) o[j] = FMIN(a[j], s); break;
  case MX_FOP_POWS: for (int64_t j = 0; j < n; j++) o[j] = v_powf(a[j], s); break;
  case MX_FOP_RPOWS: for (int64_t j = 0; j < n; j++) o[j] = v_powf(s, a[j]); break;
  default: break;
  }
}

static void fused_range(int64_t b, int64_t e, void *vc) {
  const fused_ctx *c = vc;
  const mx_fused_prog *p = c->p;
  float regs[MX_FUSED_MAX + MX_FUSED_MAX][CH];
  for (int64_t pos = b; pos < e; pos += CH) {
    int64_t n = e - pos < CH ? e - pos : CH;
    const float *r[2 * MX_FUSED_MAX];
    for (int i = 0; i < p->nin; i++) {
      if (c->mode[i] == IN_FULL) {
        r[i] = c->src[i] + pos;
      } else if (c->mode[i] == IN_SCALAR) {
        float v = c->src[i][0];
        for (int64_t j = 0; j < n; j++) regs[i][j] = v;
        r[i] = regs[i];
      } else {
        gather(c, i, pos, n, regs[i]);
        r[i] = regs[i];
      }
    }
    for (int k = 0; k < p->n; k++) {
      const mx_fused_instr *in = &p->ins[k];
      int dst = p->nin + k;
      /* the last instruction writes the output in place */
      float *o = k == p->n - 1 ? c->out + pos : regs[dst];
      if (in->code < MX_FOP_ADD) unary(in->code, n, r[in->a], o);
      else if (in->code < MX_FOP_ADDS) binary(in->code, n, r[in->a], r[in->b], o);
      else scalar(in->code, n, r[in->a], in->s, o);
      r[dst] = o;
    }
  }
}

static int fused_run(const mx_fused_prog *p, int nin, mx_tensor *const *in, mx_tensor *out) {
  if (!p || nin != p->nin || p->n < 1 || p->n > MX_FUSED_MAX || nin > MX_FUSED_MAX)
    return mx_err(MX_EINVAL, "fused elementwise: malformed program");
  if (out->dtype != MX_F32 || out->layout || mx_dev(out) != MX_CPU)
    return mx_err(MX_EINVAL, "fused elementwise: the output must be a row-major float32 cpu tensor");
  fused_ctx c;
  memset(&c, 0, sizeof c);
  c.p = p;
  c.nd = out->ndim;
  for (int d = 0; d < out->ndim; d++) c.shape[d] = out->shape[d];
  c.out = mx_ptr(out);
  for (int i = 0; i < nin; i++) {
    const mx_tensor *t = in[i];
    if (t->dtype != MX_F32 || t->layout || t->ndim > out->ndim)
      return mx_err(MX_EINVAL, "fused elementwise: input %d is not a row-major float32 tensor "
                    "of at most the output's rank", i + 1);
    c.src[i] = mx_ptr(t);
    if (t->size == out->size && t->ndim == out->ndim) c.mode[i] = IN_FULL;
    else if (t->size == 1) c.mode[i] = IN_SCALAR;
    else {
      c.mode[i] = IN_BCAST;
      int off = out->ndim - t->ndim;
      int64_t st = 1;
      for (int d = out->ndim - 1; d >= 0; d--) {
        int64_t dim = d >= off ? t->shape[d - off] : 1;
        if (dim != 1 && dim != out->shape[d])
          return mx_err(MX_EINVAL, "fused elementwise: input %d does not broadcast to the output",
                        i + 1);
        c.stride[i][d] = dim == 1 ? 0 : st;
        st *= dim;
      }
    }
  }
  for (int k = 0; k < p->n; k++) {
    const mx_fused_instr *s = &p->ins[k];
    int lim = p->nin + k;
    if (s->a < 0 || s->a >= lim || (s->code >= MX_FOP_ADD && s->code < MX_FOP_ADDS &&
                                    (s->b < 0 || s->b >= lim)))
      return mx_err(MX_EINVAL, "fused elementwise: instruction %d reads a later register", k + 1);
  }
  mx_parallel_for(out->size, (int64_t)1 << 14, fused_range, &c);
  return MX_OK;
}

/* The CPU's interpreter of fused nodes, registered with the graph layer at load. */
__attribute__((constructor)) static void fused_register(void) { mx_graph_register_fused(MX_CPU, fused_run); }
