/* bench/conv_onednn.c — the oneDNN-direct peer of bench/conv_bench.lua: the same 3x3
 * convolution (N32 C64->64 56x56 pad 1, f32) through oneDNN's C API with every tensor
 * in the layout the primitive picks ("any"; inputs reordered once, outside the timing),
 * forward inference and backward (data + weights). Prints RESULT lines (bench/harness).
 * Build and run (threads through OpenMP):
 *   cc -O2 -std=c11 -o /tmp/conv_onednn bench/conv_onednn.c -ldnnl
 *   OMP_NUM_THREADS=1 /tmp/conv_onednn [batch] */
#define _POSIX_C_SOURCE 199309L
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x) do { if ((x) != dnnl_success) { fprintf(stderr, "%s failed\n", #x); exit(1); } } while (0)

static dnnl_engine_t eng;
static dnnl_stream_t st;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* memory in the primitive's layout `md` (from the pd), filled from a plain buffer */
static dnnl_memory_t mem_for(const dnnl_memory_desc_t *md, const dnnl_memory_desc_t *plain) {
  dnnl_memory_t m, p;
  CK(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
  CK(dnnl_memory_create(&p, plain, eng, DNNL_MEMORY_ALLOCATE));
  float *v;
  CK(dnnl_memory_get_data_handle(p, (void **)&v));
  size_t n = dnnl_memory_desc_get_size(plain) / sizeof(float);
  for (size_t i = 0; i < n; i++) v[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
  dnnl_primitive_desc_t rpd;
  dnnl_primitive_t r;
  CK(dnnl_reorder_primitive_desc_create(&rpd, plain, eng, md, eng, NULL));
  CK(dnnl_primitive_create(&r, rpd));
  dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, p}, {DNNL_ARG_TO, m}};
  CK(dnnl_primitive_execute(r, st, 2, a));
  CK(dnnl_stream_wait(st));
  dnnl_primitive_destroy(r);
  dnnl_primitive_desc_destroy(rpd);
  dnnl_memory_destroy(p);
  return m;
}

static double time_prim(dnnl_primitive_t *p, int np, dnnl_exec_arg_t (*args)[3], int reps) {
  double s[16];
  for (int r = -2; r < reps; r++) {
    double t0 = now();
    for (int i = 0; i < np; i++) CK(dnnl_primitive_execute(p[i], st, 3, args[i]));
    CK(dnnl_stream_wait(st));
    if (r >= 0) s[r] = now() - t0;
  }
  qsort(s, (size_t)reps, sizeof s[0], cmp);
  return s[reps / 2];
}

int main(int argc, char **argv) {
  int N = argc > 1 ? atoi(argv[1]) : 32, C = 64, K = 64, H = 56, reps = 7;
  const char *nt = getenv("OMP_NUM_THREADS");
  CK(dnnl_engine_create(&eng, dnnl_cpu, 0));
  CK(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
  dnnl_dims_t sd = {N, C, H, H}, wd = {K, C, 3, 3}, dd = {N, K, H, H};
  dnnl_dims_t strides = {1, 1}, dil = {0, 0}, pad = {1, 1};
  dnnl_memory_desc_t s_any, w_any, d_any, s_pl, w_pl, d_pl;
  CK(dnnl_memory_desc_init_by_tag(&s_any, 4, sd, dnnl_f32, dnnl_format_tag_any));
  CK(dnnl_memory_desc_init_by_tag(&w_any, 4, wd, dnnl_f32, dnnl_format_tag_any));
  CK(dnnl_memory_desc_init_by_tag(&d_any, 4, dd, dnnl_f32, dnnl_format_tag_any));
  CK(dnnl_memory_desc_init_by_tag(&s_pl, 4, sd, dnnl_f32, dnnl_nchw));
  CK(dnnl_memory_desc_init_by_tag(&w_pl, 4, wd, dnnl_f32, dnnl_oihw));
  CK(dnnl_memory_desc_init_by_tag(&d_pl, 4, dd, dnnl_f32, dnnl_nchw));
  dnnl_convolution_desc_t fd, ft, bd, bw;
  dnnl_primitive_desc_t fpd, ftpd, bdpd, bwpd;
  CK(dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_inference,
     dnnl_convolution_direct, &s_any, &w_any, NULL, &d_any, strides, dil, pad, pad));
  CK(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL));
  CK(dnnl_dilated_convolution_forward_desc_init(&ft, dnnl_forward_training,
     dnnl_convolution_direct, &s_any, &w_any, NULL, &d_any, strides, dil, pad, pad));
  CK(dnnl_primitive_desc_create(&ftpd, &ft, NULL, eng, NULL));
  CK(dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &s_any,
     &w_any, &d_any, strides, dil, pad, pad));
  CK(dnnl_primitive_desc_create(&bdpd, &bd, NULL, eng, ftpd));
  CK(dnnl_dilated_convolution_backward_weights_desc_init(&bw, dnnl_convolution_direct, &s_any,
     &w_any, NULL, &d_any, strides, dil, pad, pad));
  CK(dnnl_primitive_desc_create(&bwpd, &bw, NULL, eng, ftpd));
#define MD(pd, q) dnnl_primitive_desc_query_md(pd, q, 0)
  dnnl_memory_t src = mem_for(MD(fpd, dnnl_query_src_md), &s_pl);
  dnnl_memory_t wei = mem_for(MD(fpd, dnnl_query_weights_md), &w_pl);
  dnnl_memory_t dst = mem_for(MD(fpd, dnnl_query_dst_md), &d_pl);
  dnnl_memory_t bsrc = mem_for(MD(bdpd, dnnl_query_diff_src_md), &s_pl);
  dnnl_memory_t bwei = mem_for(MD(bdpd, dnnl_query_weights_md), &w_pl);
  dnnl_memory_t bdst = mem_for(MD(bdpd, dnnl_query_diff_dst_md), &d_pl);
  dnnl_memory_t wsrc = mem_for(MD(bwpd, dnnl_query_src_md), &s_pl);
  dnnl_memory_t wdw = mem_for(MD(bwpd, dnnl_query_diff_weights_md), &w_pl);
  dnnl_memory_t wdst = mem_for(MD(bwpd, dnnl_query_diff_dst_md), &d_pl);
  dnnl_primitive_t fp, bp[2];
  CK(dnnl_primitive_create(&fp, fpd));
  CK(dnnl_primitive_create(&bp[0], bdpd));
  CK(dnnl_primitive_create(&bp[1], bwpd));
  dnnl_exec_arg_t fa[1][3] = {{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}}};
  dnnl_exec_arg_t ba[2][3] = {
      {{DNNL_ARG_DIFF_SRC, bsrc}, {DNNL_ARG_WEIGHTS, bwei}, {DNNL_ARG_DIFF_DST, bdst}},
      {{DNNL_ARG_SRC, wsrc}, {DNNL_ARG_DIFF_WEIGHTS, wdw}, {DNNL_ARG_DIFF_DST, wdst}}};
  double flops = 2.0 * N * K * C * H * H * 9;
  printf("RESULT\tconv3x3_fwd\tonednn\t%.4f\tGFLOP/s\tthreads=%s N%d C%d K%d %dx%d\n",
         flops / time_prim(&fp, 1, fa, reps) * 1e-9, nt ? nt : "all", N, C, K, H, H);
  printf("RESULT\tconv3x3_bwd\tonednn\t%.4f\tGFLOP/s\tthreads=%s N%d C%d K%d %dx%d\n",
         2 * flops / time_prim(bp, 2, ba, reps) * 1e-9, nt ? nt : "all", N, C, K, H, H);
  return 0;
}
