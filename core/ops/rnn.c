/* rnn.c — the rnn family's params reading (rnn.h), output count and shape/dtype inference
 * for rnn and rnn_backward. Inputs after `state` follow MXNet: state_cell only for lstm,
 * then sequence_length only with use_sequence_length (docs/rnn.md). */
#include "rnn.h"
#include "infer.h"

#include <math.h>
#include <string.h>

static const char *const MODE_NAME[] = {"rnn_relu", "rnn_tanh", "lstm", "gru"};

/* The shared part of both ops' params, copied out of either struct. */
typedef struct rnn_args {
  bool has_H, has_L, has_mode, has_proj, has_cmin, has_cmax;
  int64_t H, L, R;
  bool bidir;
  int32_t mode;
  double p, cmin, cmax;
  bool clip_nan, seqlen;
} rnn_args;

static int geom_of(const char *op, const rnn_args *a, const int64_t *ds, mx_rnn_geom *g) {
  memset(g, 0, sizeof *g);
  if (!a->has_H || a->H < 1)
    return mx_err(MX_EINVAL, "%s: state_size must be a positive integer%s", op,
                  a->has_H ? "" : " (it is required)");
  if (!a->has_L || a->L < 1 || a->L > 1024)
    return mx_err(MX_EINVAL, "%s: num_layers must be an integer in 1..1024%s", op,
                  a->has_L ? "" : " (it is required)");
  if (!a->has_mode || a->mode < 0 || a->mode > MX_RNN_MODE_GRU)
    return mx_err(MX_EINVAL, "%s: mode is required: rnn_relu, rnn_tanh, lstm or gru", op);
  if (a->has_proj && a->mode != MX_RNN_MODE_LSTM)
    return mx_err(MX_EINVAL, "%s: projection_size is for mode lstm (LSTMP), not %s", op,
                  MODE_NAME[a->mode]);
  if (a->has_proj && !(a->R >= 1 && a->R <= a->H))
    return mx_err(MX_EINVAL, "%s: projection_size=%lld must be in 1..state_size=%lld (as "
                  "MXNet's)", op, (long long)a->R, (long long)a->H);
  if (!(a->p >= 0 && a->p < 1))
    return mx_err(MX_EINVAL, "%s: p=%g must be in [0, 1)", op, a->p);
  if ((a->has_cmin || a->has_cmax) && a->mode != MX_RNN_MODE_LSTM)
    return mx_err(MX_EINVAL, "%s: lstm_state_clip_min/max are for mode lstm, not %s", op,
                  MODE_NAME[a->mode]);
  if (a->has_cmin != a->has_cmax)
    return mx_err(MX_EINVAL, "%s: give both lstm_state_clip_min and lstm_state_clip_max", op);
  if (a->has_cmin && !(a->cmin <= a->cmax))
    return mx_err(MX_EINVAL, "%s: lstm_state_clip_min=%g must not exceed "
                  "lstm_state_clip_max=%g", op, a->cmin, a->cmax);
  g->T = ds[0]; g->N = ds[1]; g->I = ds[2]; g->H = a->H;
  g->proj = a->has_proj; g->R = a->has_proj ? a->R : a->H;
  g->L = (int)a->L; g->D = a->bidir ? 2 : 1; g->mode = a->mode;
  g->G = a->mode == MX_RNN_MODE_LSTM ? 4 : a->mode == MX_RNN_MODE_GRU ? 3 : 1;
  g->seqlen = a->seqlen;
  g->clip = a->has_cmin; g->clip_min = a->cmin; g->clip_max = a->cmax;
  g->clip_nan = a->clip_nan; g->p = a->p;
  /* G*H*(in + R + 2) (+ R*H with a projection) per layer and direction; every factor was
   * bounded above or by the data's (checked) shape, so overflow needs absurd sizes: check
   * in double */
  double tot = 0;
  for (int l = 0; l < g->L; l++)
    tot += (double)g->D * ((double)g->G * g->H * ((double)mx_rnn_in(g, l) + g->R + 2) +
                           (g->proj ? (double)g->R * g->H : 0));
  if (tot > 9.0e15) return mx_err(MX_EINVAL, "%s: the parameter vector would be too large", op);
  g->nparam = (int64_t)tot;
  return MX_OK;
}

#define ARGS_FROM(P, a)                                                                    \
  do {                                                                                     \
    (a).has_H = (P)->has_state_size; (a).H = (P)->state_size;                              \
    (a).has_L = (P)->has_num_layers; (a).L = (P)->num_layers;                              \
    (a).bidir = (P)->bidirectional; (a).has_mode = (P)->has_mode; (a).mode = (P)->mode;    \
    (a).p = (P)->p; (a).has_proj = (P)->has_projection_size;                               \
    (a).R = (P)->projection_size;                                                          \
    (a).has_cmin = (P)->has_lstm_state_clip_min; (a).cmin = (P)->lstm_state_clip_min;      \
    (a).has_cmax = (P)->has_lstm_state_clip_max; (a).cmax = (P)->lstm_state_clip_max;      \
    (a).clip_nan = (P)->lstm_state_clip_nan; (a).seqlen = (P)->use_sequence_length;        \
  } while (0)

int mx_rnn_geom_fwd(const char *op, const struct mx_params_rnn *P, const int64_t *ds,
                    mx_rnn_geom *g) {
  rnn_args a;
  ARGS_FROM(P, a);
  return geom_of(op, &a, ds, g);
}

int mx_rnn_geom_bwd(const char *op, const struct mx_params_rnn_backward *P,
                    const int64_t *ds, mx_rnn_geom *g) {
  rnn_args a;
  ARGS_FROM(P, a);
  return geom_of(op, &a, ds, g);
}

static bool dropout_on(const struct mx_params_rnn *P) {
  return P->training && P->p > 0 && P->has_num_layers && P->num_layers > 1;
}

int mx_nout_rnn(const void *params) {
  const struct mx_params_rnn *P = params;
  int n = 1;
  if (P->state_outputs) n += P->has_mode && P->mode == MX_RNN_MODE_LSTM ? 2 : 1;
  if (dropout_on(P)) n++;
  if (P->training) n++; /* the reserve */
  return n;
}

static void mode_str(char *b, size_t n, const mx_rnn_geom *g) {
  char pr[48] = "";
  if (g->proj) snprintf(pr, sizeof pr, ", projection_size %lld", (long long)g->R);
  snprintf(b, n, "mode %s, state_size %lld%s, num_layers %d%s, input size %lld",
           MODE_NAME[g->mode], (long long)g->H, pr, g->L, g->D == 2 ? ", bidirectional" : "",
           (long long)g->I);
}

static bool is_float(int dt) { return dt == MX_F32 || dt == MX_F64; }

/* Checks (or, with unknown dims and partial inference, fills) input t against the shape
 * want[0..nd). */
static int want_shape(const char *op, const char *name, int pos, mx_desc *t, int nd,
                      const int64_t *want, const char *how) {
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  if (t->ndim < 0) { /* graph inference: not known yet, the data decides */
    t->ndim = nd;
    for (int d = 0; d < nd; d++) t->shape[d] = MX_DIM_UNKNOWN;
  }
  bool ok = t->ndim == nd;
  for (int d = 0; ok && d < nd; d++)
    if (t->shape[d] != want[d] && t->shape[d] != MX_DIM_UNKNOWN) ok = false;
  if (!ok)
    return mx_err(MX_EINVAL, "%s: %s (input %d) must have shape %s %s, got %s", op, name, pos,
                  mx_shape_str(a, nd, want), how, mx_shape_str(b, t->ndim, t->shape));
  for (int d = 0; d < nd; d++) t->shape[d] = want[d];
  return MX_OK;
}

/* The inputs both ops share: data, parameters, state (+ cell, seqlen where given at the
 * positions pc / ps, -1 absent). */
static int check_common(const char *op, const mx_rnn_geom *g, mx_desc *const *in, int pc,
                        int ps) {
  char m[256], a[MX_SHAPE_BUF];
  const mx_desc *x = in[0];
  if (!is_float(x->dtype))
    return mx_err(MX_EINVAL, "%s: data has dtype %s; rnn needs float32 or float64", op,
                  mx_dtype_name(x->dtype));
  mode_str(m, sizeof m, g);
  mx_desc *w = in[1];
  if (w->ndim < 0) { /* graph inference: not known yet, the data decides */
    w->ndim = 1;
    w->shape[0] = MX_DIM_UNKNOWN;
  }
  if (w->ndim != 1 || (w->shape[0] != g->nparam && w->shape[0] != MX_DIM_UNKNOWN))
    return mx_err(MX_EINVAL, "%s: parameters (input 2) must be 1-D with %lld elements for %s; "
                  "got shape %s", op, (long long)g->nparam, m, mx_shape_str(a, w->ndim, w->shape));
  w->shape[0] = g->nparam;
  int64_t st[3] = {(int64_t)g->L * g->D, g->N, g->R}, cs[3] = {st[0], g->N, g->H};
  int rc = want_shape(op, "state", 3, in[2], 3, st, g->proj
                      ? "(num_layers*directions, batch, projection_size)"
                      : "(num_layers*directions, batch, state_size)");
  if (rc) return rc;
  if (pc >= 0) {
    rc = want_shape(op, "state_cell", pc + 1, in[pc], 3, cs,
                    "(num_layers*directions, batch, state_size)");
    if (rc) return rc;
    if (in[pc]->dtype != x->dtype)
      return mx_err(MX_EINVAL, "%s: state_cell has dtype %s, data %s", op,
                    mx_dtype_name(in[pc]->dtype), mx_dtype_name(x->dtype));
  }
  if (ps >= 0) {
    int64_t sn[1] = {g->N};
    rc = want_shape(op, "sequence_length", ps + 1, in[ps], 1, sn, "(batch)");
    if (rc) return rc;
  }
  return MX_OK;
}

static int data_ok(const char *op, const mx_desc *x) {
  char a[MX_SHAPE_BUF];
  if (x->ndim != 3)
    return mx_err(MX_EINVAL, "%s: data must be 3-D (seq_len, batch, input_size), time-major, "
                  "got %s", op, mx_shape_str(a, x->ndim, x->shape));
  for (int d = 0; d < 3; d++)
    if (x->shape[d] < 0)
      return mx_err(MX_EINVAL, "%s: data's shape %s must be known", op,
                    mx_shape_str(a, x->ndim, x->shape));
  return MX_OK;
}

int mx_infer_rnn(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
                 mx_desc *out, mx_op_info *info) {
  const struct mx_params_rnn *P = p;
  const char *op = def->name;
  int rc;
  /* graph inference before the data is known (the params of an imported file): outputs
   * unknown until it is */
  bool data_unknown = in[0]->ndim < 0;
  for (int d = 0; d < in[0]->ndim && d < MX_MAX_DIM; d++)
    if (in[0]->shape[d] < 0) data_unknown = true;
  if (data_unknown && (in[0]->ndim < 0 || in[0]->ndim == 3)) return MX_OK;
  if ((rc = data_ok(op, in[0]))) return rc;
  mx_rnn_geom g;
  if ((rc = mx_rnn_geom_fwd(op, P, in[0]->shape, &g))) return rc;
  bool lstm = g.mode == MX_RNN_MODE_LSTM;
  int want = 3 + (lstm ? 1 : 0) + (g.seqlen ? 1 : 0);
  if (nin != want) {
    if (lstm && nin < want)
      return mx_err(MX_EINVAL, "%s: mode lstm needs state_cell (input 4)%s; got %d inputs", op,
                    g.seqlen ? " and sequence_length (input 5)" : "", nin);
    if (g.seqlen && nin < want)
      return mx_err(MX_EINVAL, "%s: use_sequence_length needs sequence_length (input %d); got "
                    "%d inputs", op, want, nin);
    return mx_err(MX_EINVAL, "%s: mode %s%s takes %d inputs (data, parameters, state%s%s), "
                  "got %d", op, MODE_NAME[g.mode], g.seqlen ? " with use_sequence_length" : "",
                  want, lstm ? ", state_cell" : "", g.seqlen ? ", sequence_length" : "", nin);
  }
  if ((rc = check_common(op, &g, in, lstm ? 3 : -1, g.seqlen ? want - 1 : -1))) return rc;
  int dt = in[0]->dtype;
  int64_t os[3] = {g.T, g.N, (int64_t)g.D * g.R};
  int k = 0;
  mx_out_set(&out[k++], 3, os, dt);
  if (P->state_outputs) {
    mx_out_set(&out[k++], 3, in[2]->shape, dt);
    if (lstm) mx_out_set(&out[k++], 3, in[3]->shape, dt);
  }
  if (dropout_on(P)) {
    int64_t ms[4] = {g.L - 1, g.T, g.N, (int64_t)g.D * g.R};
    mx_out_set(&out[k++], 4, ms, dt);
    info->rng_draws = ms[0] * ms[1] * ms[2] * ms[3];
  }
  if (P->training) {
    int64_t rs[1] = {mx_rnn_reserve_len(&g)};
    mx_out_set(&out[k++], 1, rs, dt);
  }
  (void)nout;
  return MX_OK;
}

int mx_infer_rnn_backward(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                          int nout, mx_desc *out, mx_op_info *info) {
  const struct mx_params_rnn_backward *P = p;
  const char *op = def->name;
  (void)nin, (void)nout, (void)info;
  int rc;
  if ((rc = data_ok(op, in[0]))) return rc;
  mx_rnn_geom g;
  if ((rc = mx_rnn_geom_bwd(op, P, in[0]->shape, &g))) return rc;
  bool lstm = g.mode == MX_RNN_MODE_LSTM;
  if ((rc = check_common(op, &g, in, lstm ? 3 : -1, g.seqlen ? 4 : -1))) return rc;
  int64_t os[3] = {g.T, g.N, (int64_t)g.D * g.R};
  if ((rc = want_shape(op, "dout", 7, in[6], 3, os, g.proj
                       ? "(seq_len, batch, directions*projection_size)"
                       : "(seq_len, batch, directions*state_size)")))
    return rc;
  int64_t st[3] = {(int64_t)g.L * g.D, g.N, g.R}, cs[3] = {st[0], g.N, g.H};
  if ((rc = want_shape(op, "dhy", 8, in[7], 3, st, g.proj
                       ? "(num_layers*directions, batch, projection_size)"
                       : "(num_layers*directions, batch, state_size)")))
    return rc;
  if (lstm && (rc = want_shape(op, "dcy", 9, in[8], 3, cs,
                               "(num_layers*directions, batch, state_size)")))
    return rc;
  if (P->use_reserve) {
    int64_t rs[1] = {mx_rnn_reserve_len(&g)};
    if ((rc = want_shape(op, "reserve", 10, in[9], 1, rs, "(the forward's training reserve)")))
      return rc;
  }
  if (P->use_mask) {
    int64_t ms[4] = {g.L - 1, g.T, g.N, (int64_t)g.D * g.R};
    if ((rc = want_shape(op, "mask", 6, in[5], 4, ms, "(num_layers-1, seq_len, batch, "
                         "directions*state_size (or projection_size))")))
      return rc;
  }
  int dt = in[0]->dtype;
  mx_out_set(&out[0], 3, in[0]->shape, dt);
  int64_t ws[1] = {g.nparam};
  mx_out_set(&out[1], 1, ws, dt);
  mx_out_set(&out[2], 3, st, dt);
  mx_out_set(&out[3], 3, cs, dt);
  return MX_OK;
}
