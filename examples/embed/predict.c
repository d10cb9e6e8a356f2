/* predict.c — classify a photo with an exported model through MXNet's C predict API, as
 * MXNet's own image-classification-predict example does, built against luamx:
 *
 *   cc predict.c $(pkg-config --cflags --libs luamx) -ljpeg -o predict
 *   ./predict model-symbol.json model-0000.params photo.jpg names.txt [threads]
 *
 * The photo (JPEG, decoded with libjpeg) is resized to 224x224, laid out as RGB planes
 * and normalised with ImageNet's mean and std (Gluon's model zoo convention); names.txt
 * has one class name per line (Debian's opencv-doc ships ImageNet's 1000:
 * dnn/classification_classes_ILSVRC2012.txt). Prints the five best classes with their
 * scores, and with threads > 1 runs that many predictors of one model
 * (MXPredCreateMultiThread), one per thread, and checks they agree. */
#include <mxnet/c_predict_api.h>

#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h> /* after stdio.h: it uses FILE and size_t */

enum { W = 224, H = 224 };

static char *read_file(const char *path, long *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  if (fseek(f, 0, SEEK_END) == 0 && (*len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (buf = malloc((size_t)*len + 1)) && fread(buf, 1, (size_t)*len, f) == (size_t)*len) {
    buf[*len] = 0;
  } else {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  return buf;
}

struct jerr { struct jpeg_error_mgr mgr; jmp_buf jb; };
static void on_jpeg_error(j_common_ptr c) { longjmp(((struct jerr *)c->err)->jb, 1); }

/* The photo as 8-bit RGB (w x h x 3), or NULL. */
static unsigned char *decode_jpeg(const char *path, int *w, int *h) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  struct jpeg_decompress_struct d;
  struct jerr err;
  unsigned char *volatile rgb = NULL;
  d.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = on_jpeg_error;
  if (setjmp(err.jb)) {
    jpeg_destroy_decompress(&d);
    fclose(f);
    free(rgb);
    return NULL;
  }
  jpeg_create_decompress(&d);
  jpeg_stdio_src(&d, f);
  jpeg_read_header(&d, TRUE);
  d.out_color_space = JCS_RGB;
  jpeg_start_decompress(&d);
  *w = (int)d.output_width;
  *h = (int)d.output_height;
  rgb = malloc((size_t)*w * (size_t)*h * 3);
  while (rgb && d.output_scanline < d.output_height) {
    JSAMPROW row = rgb + (size_t)d.output_scanline * (size_t)*w * 3;
    jpeg_read_scanlines(&d, &row, 1);
  }
  jpeg_finish_decompress(&d);
  jpeg_destroy_decompress(&d);
  fclose(f);
  return rgb;
}

/* Bilinear resize to W x H (pixel centres aligned, as OpenCV's INTER_LINEAR), RGB planes,
 * (x / 255 - mean) / std. */
static void preprocess(const unsigned char *rgb, int w, int h, float *out) {
  static const float mean[3] = {0.485f, 0.456f, 0.406f}, std_[3] = {0.229f, 0.224f, 0.225f};
  for (int y = 0; y < H; y++) {
    float sy = ((float)y + 0.5f) * (float)h / H - 0.5f;
    if (sy < 0) sy = 0;
    int y0 = (int)sy, y1 = y0 + 1 < h ? y0 + 1 : y0;
    float fy = sy - (float)y0;
    for (int x = 0; x < W; x++) {
      float sx = ((float)x + 0.5f) * (float)w / W - 0.5f;
      if (sx < 0) sx = 0;
      int x0 = (int)sx, x1 = x0 + 1 < w ? x0 + 1 : x0;
      float fx = sx - (float)x0;
      for (int c = 0; c < 3; c++) {
        float a = rgb[((size_t)y0 * (size_t)w + (size_t)x0) * 3 + (size_t)c];
        float b = rgb[((size_t)y0 * (size_t)w + (size_t)x1) * 3 + (size_t)c];
        float p = rgb[((size_t)y1 * (size_t)w + (size_t)x0) * 3 + (size_t)c];
        float q = rgb[((size_t)y1 * (size_t)w + (size_t)x1) * 3 + (size_t)c];
        float v = (a * (1 - fx) + b * fx) * (1 - fy) + (p * (1 - fx) + q * fx) * fy;
        out[(size_t)c * H * W + (size_t)y * W + (size_t)x] = (v / 255.0f - mean[c]) / std_[c];
      }
    }
  }
}

static char **load_names(const char *path, int *n) {
  long len;
  char *text = read_file(path, &len);
  if (!text) return NULL;
  int cap = 1024;
  char **names = malloc((size_t)cap * sizeof *names);
  *n = 0;
  for (char *line = strtok(text, "\n"); line && names; line = strtok(NULL, "\n")) {
    if (*n == cap) names = realloc(names, (size_t)(cap *= 2) * sizeof *names);
    if (names) names[(*n)++] = line; /* points into text, kept for the program's life */
  }
  return names;
}

typedef struct job {
  PredictorHandle h;
  const float *image;
  float *scores;
  uint32_t n;
  int rc;
} job;

/* One forward on h: the image in, the scores out (what every predictor thread runs). */
static void *run_one(void *arg) {
  job *j = arg;
  uint32_t *shape, ndim;
  j->rc = -1;
  if (MXPredSetInput(j->h, "data", j->image, 3 * W * H) || MXPredForward(j->h) ||
      MXPredGetOutputShape(j->h, 0, &shape, &ndim))
    return NULL;
  j->n = 1;
  for (uint32_t i = 0; i < ndim; i++) j->n *= shape[i];
  j->scores = malloc(j->n * sizeof(float));
  if (j->scores && MXPredGetOutput(j->h, 0, j->scores, j->n) == 0) j->rc = 0;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s model-symbol.json model-0000.params photo.jpg names.txt [threads]\n", argv[0]);
    return 2;
  }
  int nthreads = argc > 5 ? atoi(argv[5]) : 1;
  if (nthreads < 1 || nthreads > 64) nthreads = 1;
  long jlen, plen;
  char *json = read_file(argv[1], &jlen), *params = read_file(argv[2], &plen);
  if (!json || !params) {
    fprintf(stderr, "cannot read %s or %s\n", argv[1], argv[2]);
    return 1;
  }
  int w, h, nnames = 0;
  unsigned char *rgb = decode_jpeg(argv[3], &w, &h);
  char **names = load_names(argv[4], &nnames);
  if (!rgb || !names) {
    fprintf(stderr, "cannot read the photo %s or the names %s\n", argv[3], argv[4]);
    return 1;
  }
  float *image = malloc(sizeof(float) * 3 * W * H);
  preprocess(rgb, w, h, image);
  printf("photo %s: %dx%d\n", argv[3], w, h);
  const char *dump = getenv("PREDICT_DUMP_INPUT"); /* the model's input, raw float32 */
  FILE *df = dump ? fopen(dump, "wb") : NULL;
  if (df) {
    fwrite(image, sizeof(float), 3 * W * H, df);
    fclose(df);
  }

  const char *keys[1] = {"data"};
  const uint32_t indptr[2] = {0, 4}, shape[4] = {1, 3, H, W};
  PredictorHandle hs[64];
  int rc = nthreads == 1
               ? MXPredCreate(json, params, (int)plen, 1, 0, 1, keys, indptr, shape, &hs[0])
               : MXPredCreateMultiThread(json, params, (int)plen, 1, 0, 1, keys, indptr, shape,
                                         nthreads, hs);
  if (rc) {
    fprintf(stderr, "MXPredCreate: %s\n", MXGetLastError());
    return 1;
  }
  job jobs[64];
  pthread_t t[64];
  for (int i = 0; i < nthreads; i++) {
    jobs[i] = (job){hs[i], image, NULL, 0, -1};
    pthread_create(&t[i], NULL, run_one, &jobs[i]);
  }
  for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < nthreads; i++) {
    if (jobs[i].rc) {
      fprintf(stderr, "predictor %d: %s\n", i, MXGetLastError());
      return 1;
    }
    if (memcmp(jobs[i].scores, jobs[0].scores, jobs[0].n * sizeof(float)) != 0) {
      fprintf(stderr, "predictor %d disagrees with predictor 0\n", i);
      return 1;
    }
  }
  const float *s = jobs[0].scores;
  uint32_t n = jobs[0].n;
  if ((int)n != nnames) fprintf(stderr, "warning: %u scores but %d names\n", n, nnames);
  int top[5] = {-1, -1, -1, -1, -1};
  for (int k = 0; k < 5; k++)
    for (uint32_t i = 0; i < n; i++) {
      bool taken = false;
      for (int q = 0; q < k; q++) taken |= top[q] == (int)i;
      if (!taken && (top[k] < 0 || s[i] > s[top[k]])) top[k] = (int)i;
    }
  printf("top-5 (%d predictor%s agree):\n", nthreads, nthreads > 1 ? "s" : "");
  for (int k = 0; k < 5 && top[k] >= 0; k++)
    printf("  %d. [%d] %.6f %s\n", k + 1, top[k], s[top[k]], top[k] < nnames ? names[top[k]] : "?");
  for (int i = 0; i < nthreads; i++) {
    MXPredFree(hs[i]);
    free(jobs[i].scores);
  }
  free(image);
  free(rgb);
  free(json);
  free(params);
  return 0;
}
