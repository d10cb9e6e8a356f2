/* imgcodec.c — JPEG (libjpeg-turbo's libjpeg API) and PNG (libpng) decoding to HWC
 * uint8 tensors and encoding from them, with OpenCV's imdecode/imencode conventions
 * (what MXNet 1.9's mx.image.imdecode and recordio.pack_img/unpack_img run):
 *   flag 1: 3 channels (gray replicated, CMYK converted, alpha dropped, palette
 *           expanded, 16-bit reduced to its high byte as png_set_strip_16 does);
 *   flag 0: 1 channel (libjpeg's gray output; libpng's rgb_to_gray, 0.299/0.587/0.114);
 *   flag -1: as stored (1, 3 or 4 channels, 8-bit).
 * Both libraries report errors through callbacks that must not return: they longjmp
 * back here with the library's message, so bad input is an MX_EFORMAT error naming the
 * problem, never an exit() or a crash. Dimensions are checked against MX_IMG_MAX_PIXELS
 * after the header and before any pixel buffer exists. A truncated JPEG is an error
 * (libjpeg would fill the rest with gray and only warn, as OpenCV accepts). */
#include "internal.h"

#include <jpeglib.h>
#include <jerror.h> /* the JWRN_ message codes */
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
/* a 4 KiB input may declare a huge image that then turns out truncated: keep the fuzzer's
 * allocations under its malloc limit */
#define MX_IMG_MAX_PIXELS (INT64_C(1) << 22)
#else
#define MX_IMG_MAX_PIXELS (INT64_C(1) << 28)
#endif
#define MX_IMG_MAX_DIM 65535
#define MX_JPEG_MAX_SCANS 1000 /* progressive files with endless scans: a CPU bomb */

static int check_dims(const char *fmt, int64_t w, int64_t h) {
  if (w <= 0 || h <= 0)
    return mx_err(MX_EFORMAT, "imdecode: %s image has an empty size %lldx%lld", fmt,
                  (long long)w, (long long)h);
  if (w > MX_IMG_MAX_DIM || h > MX_IMG_MAX_DIM || w * h > MX_IMG_MAX_PIXELS)
    return mx_err(MX_EFORMAT, "imdecode: %s image of %lldx%lld pixels is too large (limit "
                  "%d per side, %lld pixels)", fmt, (long long)w, (long long)h, MX_IMG_MAX_DIM,
                  (long long)MX_IMG_MAX_PIXELS);
  return MX_OK;
}

static int new_image(int64_t h, int64_t w, int c, mx_tensor **out) {
  int64_t s[3] = { h, w, c };
  return mx_tensor_new(3, s, MX_U8, MX_CPU, 0, out);
}

/* ---------------------------------------------------------------- JPEG */
typedef struct {
  struct jpeg_error_mgr pub;
  jmp_buf jb;
  char msg[JMSG_LENGTH_MAX];
  int truncated;
} jerr_t;

static void jpeg_fail(j_common_ptr ci) {
  jerr_t *e = (jerr_t *)ci->err;
  e->pub.format_message(ci, e->msg);
  longjmp(e->jb, 1);
}

/* warnings: premature end of data means a truncated file, an error here */
static void jpeg_note(j_common_ptr ci, int level) {
  jerr_t *e = (jerr_t *)ci->err;
  if (level < 0 && (e->pub.msg_code == JWRN_JPEG_EOF || e->pub.msg_code == JWRN_HIT_MARKER)) {
    e->truncated = 1;
    e->pub.format_message(ci, e->msg);
    longjmp(e->jb, 1);
  }
}

static void jpeg_progress(j_common_ptr ci) {
  j_decompress_ptr d = (j_decompress_ptr)ci;
  if (d->input_scan_number > MX_JPEG_MAX_SCANS) {
    jerr_t *e = (jerr_t *)ci->err;
    snprintf(e->msg, sizeof e->msg, "more than %d progressive scans", MX_JPEG_MAX_SCANS);
    longjmp(e->jb, 1);
  }
}

static int jpeg_decode(const unsigned char *buf, size_t len, int flag, int to_rgb,
                       mx_tensor **out) {
  struct jpeg_decompress_struct ci;
  struct jpeg_progress_mgr prog = { .progress_monitor = jpeg_progress };
  jerr_t e;
  mx_tensor *volatile t = NULL;
  unsigned char *volatile tmp = NULL;
  memset(&ci, 0, sizeof ci);
  ci.err = jpeg_std_error(&e.pub);
  e.pub.error_exit = jpeg_fail;
  e.pub.emit_message = jpeg_note;
  e.truncated = 0;
  e.msg[0] = 0;
  if (setjmp(e.jb)) {
    jpeg_destroy_decompress(&ci);
    mx_tensor_release(t);
    free(tmp);
    return mx_err(MX_EFORMAT, "imdecode: %s JPEG: %s", e.truncated ? "truncated" : "corrupt",
                  e.msg);
  }
  jpeg_create_decompress(&ci);
  ci.progress = &prog;
  jpeg_mem_src(&ci, buf, (unsigned long)len);
  jpeg_read_header(&ci, TRUE);
  int rc = check_dims("JPEG", ci.image_width, ci.image_height);
  if (rc) {
    jpeg_destroy_decompress(&ci);
    return rc;
  }
  int cmyk = ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK;
  int c = flag == 0 ? 1 : flag == 1 ? 3 : (ci.num_components == 1 ? 1 : 3);
  if (c == 1) ci.out_color_space = JCS_GRAYSCALE;
  else if (cmyk) ci.out_color_space = JCS_CMYK;
  else ci.out_color_space = to_rgb ? JCS_RGB : JCS_EXT_BGR;
  jpeg_start_decompress(&ci);
  int64_t w = ci.output_width, h = ci.output_height;
  if ((rc = new_image(h, w, c, (mx_tensor **)&t))) {
    jpeg_destroy_decompress(&ci);
    return rc;
  }
  unsigned char *px = mx_ptr(t);
  if (cmyk && c == 3) {
    tmp = malloc((size_t)w * 4);
    if (!tmp) longjmp(e.jb, 1);
  }
  while (ci.output_scanline < ci.output_height) {
    unsigned char *row = px + (size_t)ci.output_scanline * (size_t)w * (size_t)c;
    JSAMPROW r = tmp ? tmp : row;
    jpeg_read_scanlines(&ci, &r, 1);
    if (tmp) /* OpenCV's icvCvt_CMYK2BGR on Adobe's inverted CMYK */
      for (int64_t x = 0; x < w; x++) {
        const unsigned char *q = tmp + 4 * x;
        int k = q[3];
        unsigned char C = (unsigned char)(k - ((255 - q[0]) * k >> 8)),
                      M = (unsigned char)(k - ((255 - q[1]) * k >> 8)),
                      Y = (unsigned char)(k - ((255 - q[2]) * k >> 8));
        row[3 * x] = to_rgb ? C : Y;
        row[3 * x + 1] = M;
        row[3 * x + 2] = to_rgb ? Y : C;
      }
  }
  jpeg_finish_decompress(&ci);
  jpeg_destroy_decompress(&ci);
  free(tmp);
  *out = t;
  return MX_OK;
}

/* ---------------------------------------------------------------- PNG */
typedef struct {
  const unsigned char *p;
  size_t len, pos;
  char msg[256];
} pngsrc_t;

static void png_fail(png_structp png, png_const_charp m) {
  pngsrc_t *s = png_get_error_ptr(png);
  snprintf(s->msg, sizeof s->msg, "%s", m);
  png_longjmp(png, 1);
}
static void png_quiet(png_structp png, png_const_charp m) { (void)png; (void)m; }

static void png_read_mem(png_structp png, png_bytep dst, size_t n) {
  pngsrc_t *s = png_get_io_ptr(png);
  if (n > s->len - s->pos) png_error(png, "truncated PNG (data ends early)");
  memcpy(dst, s->p + s->pos, n);
  s->pos += n;
}

static int png_decode(const unsigned char *buf, size_t len, int flag, int to_rgb,
                      mx_tensor **out) {
  pngsrc_t s = { buf, len, 0, "" };
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, png_fail, png_quiet);
  if (!png) return mx_err(MX_ENOMEM, "imdecode: out of memory");
  png_infop info = png_create_info_struct(png);
  mx_tensor *volatile t = NULL;
  png_bytep *volatile rows = NULL;
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, info ? &info : NULL, NULL);
    mx_tensor_release(t);
    free(rows);
    return mx_err(MX_EFORMAT, "imdecode: corrupt PNG: %s", s.msg[0] ? s.msg : "out of memory");
  }
  png_set_read_fn(png, &s, png_read_mem);
  png_set_user_limits(png, MX_IMG_MAX_DIM, MX_IMG_MAX_DIM);
  png_set_chunk_malloc_max(png, 64u << 20);
  /* libpng 1.6.39 allocates a text/profile chunk's declared length before reading it (a
   * 1 KiB file could ask for 700 MB; found by tools/fuzz/fuzz_imdecode.c): skip every
   * chunk whose content decoding does not use, unread (OpenCV ignores them too) */
  static const png_byte skip[] = "tEXt\0zTXt\0iTXt\0iCCP\0sPLT\0eXIf\0pCAL\0sCAL\0hIST\0";
  png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, NULL, 0);
  png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, skip, (int)(sizeof skip / 5));
  png_read_info(png, info);
  png_uint_32 w, h;
  int depth, ctype;
  png_get_IHDR(png, info, &w, &h, &depth, &ctype, NULL, NULL, NULL);
  int rc = check_dims("PNG", w, h);
  if (rc) {
    png_destroy_read_struct(&png, &info, NULL);
    return rc;
  }
  int colour = (ctype & PNG_COLOR_MASK_COLOR) != 0, alpha = (ctype & PNG_COLOR_MASK_ALPHA) ||
      png_get_valid(png, info, PNG_INFO_tRNS);
  int c = flag == 0 ? 1 : flag == 1 ? 3 : (colour ? 3 : 1) + (alpha ? 1 : 0);
  if (c == 2) c = 4; /* gray + alpha as stored: OpenCV gives 4 channels (BGRA) */
  if (depth == 16) png_set_strip_16(png);
  if (ctype == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (!colour && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (c == 4) png_set_tRNS_to_alpha(png);
  else png_set_strip_alpha(png);
  if (c >= 3 && !colour && ctype != PNG_COLOR_TYPE_PALETTE) png_set_gray_to_rgb(png);
  if (c == 4 && !(ctype & PNG_COLOR_MASK_ALPHA) && !png_get_valid(png, info, PNG_INFO_tRNS))
    png_set_add_alpha(png, 0xff, PNG_FILLER_AFTER);
  if (c == 1 && (colour || ctype == PNG_COLOR_TYPE_PALETTE))
    png_set_rgb_to_gray(png, 1, 0.299, 0.587);
  if (c >= 3 && !to_rgb) png_set_bgr(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != (size_t)w * (size_t)c)
    png_error(png, "unsupported PNG pixel layout");
  if ((rc = new_image(h, w, c, (mx_tensor **)&t))) {
    png_destroy_read_struct(&png, &info, NULL);
    return rc;
  }
  rows = malloc(sizeof(png_bytep) * h);
  if (!rows) png_error(png, "out of memory");
  unsigned char *px = mx_ptr(t);
  for (png_uint_32 y = 0; y < h; y++) rows[y] = px + (size_t)y * w * (size_t)c;
  png_read_image(png, rows);
  png_read_end(png, NULL);
  png_destroy_read_struct(&png, &info, NULL);
  free(rows);
  *out = t;
  return MX_OK;
}

int mx_image_decode(const void *buf, size_t len, int flag, int to_rgb, mx_tensor **out) {
  const unsigned char *b = buf;
  if (!out) return mx_err(MX_EINVAL, "imdecode: out is NULL");
  *out = NULL;
  if (flag < -1 || flag > 1)
    return mx_err(MX_EINVAL, "imdecode: flag must be 1 (colour), 0 (gray) or -1 (as stored), "
                  "got %d", flag);
  if (!b || len == 0) return mx_err(MX_EFORMAT, "imdecode: empty buffer (0 bytes)");
  if (len >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF)
    return jpeg_decode(b, len, flag, to_rgb, out);
  if (len >= 8 && !png_sig_cmp(b, 0, 8)) return png_decode(b, len, flag, to_rgb, out);
  return mx_err(MX_EFORMAT, "imdecode: not a JPEG or PNG image (%zu bytes starting "
                "%02x %02x %02x %02x)", len, b[0], len > 1 ? b[1] : 0, len > 2 ? b[2] : 0,
                len > 3 ? b[3] : 0);
}

/* ---------------------------------------------------------------- encoding */
typedef struct {
  unsigned char *p;
  size_t len, cap;
  char msg[256];
} pngdst_t;

static void png_write_mem(png_structp png, png_bytep src, size_t n) {
  pngdst_t *d = png_get_io_ptr(png);
  if (n > d->cap - d->len) {
    size_t cap = d->cap ? d->cap : 4096;
    while (cap - d->len < n) cap *= 2;
    unsigned char *q = realloc(d->p, cap);
    if (!q) png_error(png, "out of memory");
    d->p = q;
    d->cap = cap;
  }
  memcpy(d->p + d->len, src, n);
  d->len += n;
}
static void png_flush_mem(png_structp png) { (void)png; }

static int png_encode(const unsigned char *px, int64_t h, int64_t w, int c, int level,
                      int from_rgb, void **out, size_t *len) {
  pngdst_t d = { NULL, 0, 0, "" };
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &d, png_fail, png_quiet);
  if (!png) return mx_err(MX_ENOMEM, "imencode: out of memory");
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, info ? &info : NULL);
    free(d.p);
    return mx_err(MX_EINVAL, "imencode: PNG: %s", d.msg[0] ? d.msg : "out of memory");
  }
  png_set_write_fn(png, &d, png_write_mem, png_flush_mem);
  png_set_compression_level(png, level);
  int ct = c == 1 ? PNG_COLOR_TYPE_GRAY : c == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_RGBA;
  png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, ct, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  if (c >= 3 && !from_rgb) png_set_bgr(png);
  for (int64_t y = 0; y < h; y++)
    png_write_row(png, (png_const_bytep)(px + (size_t)y * (size_t)w * (size_t)c));
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  *out = d.p;
  *len = d.len;
  return MX_OK;
}

static int jpeg_encode(const unsigned char *px, int64_t h, int64_t w, int c, int quality,
                       int from_rgb, void **out, size_t *len) {
  struct jpeg_compress_struct ci;
  jerr_t e;
  unsigned char *volatile mem = NULL;
  unsigned long n = 0;
  memset(&ci, 0, sizeof ci);
  ci.err = jpeg_std_error(&e.pub);
  e.pub.error_exit = jpeg_fail;
  if (setjmp(e.jb)) {
    jpeg_destroy_compress(&ci);
    free(mem);
    return mx_err(MX_EINVAL, "imencode: JPEG: %s", e.msg);
  }
  jpeg_create_compress(&ci);
  jpeg_mem_dest(&ci, (unsigned char **)&mem, &n);
  ci.image_width = (JDIMENSION)w;
  ci.image_height = (JDIMENSION)h;
  ci.input_components = c;
  ci.in_color_space = c == 1 ? JCS_GRAYSCALE : from_rgb ? JCS_RGB : JCS_EXT_BGR;
  jpeg_set_defaults(&ci);
  jpeg_set_quality(&ci, quality, TRUE);
  jpeg_start_compress(&ci, TRUE);
  while (ci.next_scanline < ci.image_height) {
    JSAMPROW r = (JSAMPROW)(px + (size_t)ci.next_scanline * (size_t)w * (size_t)c);
    jpeg_write_scanlines(&ci, &r, 1);
  }
  jpeg_finish_compress(&ci);
  jpeg_destroy_compress(&ci);
  /* jpeg_mem_dest's buffer is malloc'd by libjpeg-turbo: mx_free releases it */
  *out = mem;
  *len = n;
  return MX_OK;
}

int mx_image_encode(mx_tensor *img, int fmt, int param, int from_rgb, void **out,
                    size_t *len) {
  if (!img || !out || !len) return mx_err(MX_EINVAL, "imencode: NULL argument");
  *out = NULL;
  *len = 0;
  if (img->ndim != 3 || img->dtype != MX_U8 || mx_dev(img) != MX_CPU)
    return mx_err(MX_EINVAL, "imencode: expected a CPU uint8 image (H, W, C)");
  int64_t h = img->shape[0], w = img->shape[1], c = img->shape[2];
  if (fmt != 0 && fmt != 1) return mx_err(MX_EINVAL, "imencode: fmt must be 0 (JPEG) or 1 (PNG)");
  if (h <= 0 || w <= 0 || h > MX_IMG_MAX_DIM || w > MX_IMG_MAX_DIM)
    return mx_err(MX_EINVAL, "imencode: image size %lldx%lld outside 1..%d", (long long)w,
                  (long long)h, MX_IMG_MAX_DIM);
  if (!(c == 1 || c == 3 || (c == 4 && fmt == 1)))
    return mx_err(MX_EINVAL, "imencode: %lld channels (JPEG takes 1 or 3, PNG 1, 3 or 4)",
                  (long long)c);
  if (fmt == 0 && (param < 1 || param > 100))
    return mx_err(MX_EINVAL, "imencode: JPEG quality must be in 1..100, got %d", param);
  if (fmt == 1 && (param < 0 || param > 9))
    return mx_err(MX_EINVAL, "imencode: PNG compression must be in 0..9, got %d", param);
  /* tensors are row-major and dense (views included); data waits for pending writers */
  const unsigned char *px = mx_tensor_data(img);
  if (!px) return mx_err(MX_EINVAL, "imencode: the image has no readable data");
  int rc = fmt == 0 ? jpeg_encode(px, h, w, (int)c, param, from_rgb, out, len)
                    : png_encode(px, h, w, (int)c, param, from_rgb, out, len);
  return rc;
}

/* ---------------------------------------------------------------- headers only */
static int jpeg_header(const unsigned char *buf, size_t len, int64_t *h, int64_t *w, int *c) {
  struct jpeg_decompress_struct ci;
  jerr_t e;
  memset(&ci, 0, sizeof ci);
  ci.err = jpeg_std_error(&e.pub);
  e.pub.error_exit = jpeg_fail;
  e.pub.emit_message = jpeg_note;
  e.truncated = 0;
  e.msg[0] = 0;
  if (setjmp(e.jb)) {
    jpeg_destroy_decompress(&ci);
    return mx_err(MX_EFORMAT, "imdecode: %s JPEG: %s", e.truncated ? "truncated" : "corrupt", e.msg);
  }
  jpeg_create_decompress(&ci);
  jpeg_mem_src(&ci, buf, (unsigned long)len);
  jpeg_read_header(&ci, TRUE);
  *w = ci.image_width;
  *h = ci.image_height;
  *c = ci.num_components;
  jpeg_destroy_decompress(&ci);
  return MX_OK;
}

static int png_header(const unsigned char *buf, size_t len, int64_t *h, int64_t *w, int *c) {
  pngsrc_t s = { buf, len, 0, "" };
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, png_fail, png_quiet);
  if (!png) return mx_err(MX_ENOMEM, "imdecode: out of memory");
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, info ? &info : NULL, NULL);
    return mx_err(MX_EFORMAT, "imdecode: corrupt PNG: %s", s.msg[0] ? s.msg : "out of memory");
  }
  png_set_read_fn(png, &s, png_read_mem);
  png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, NULL, 0);
  png_read_info(png, info);
  png_uint_32 pw, ph;
  int depth, ctype;
  png_get_IHDR(png, info, &pw, &ph, &depth, &ctype, NULL, NULL, NULL);
  *w = pw;
  *h = ph;
  *c = png_get_channels(png, info);
  png_destroy_read_struct(&png, &info, NULL);
  return MX_OK;
}

int mx_image_info(const void *buf, size_t len, int64_t *h, int64_t *w, int *c) {
  const unsigned char *b = buf;
  if (!h || !w || !c) return mx_err(MX_EINVAL, "image_info: NULL output");
  *h = *w = 0;
  *c = 0;
  if (!b || len == 0) return mx_err(MX_EFORMAT, "imdecode: empty buffer (0 bytes)");
  if (len >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return jpeg_header(b, len, h, w, c);
  if (len >= 8 && !png_sig_cmp(b, 0, 8)) return png_header(b, len, h, w, c);
  return mx_err(MX_EFORMAT, "imdecode: not a JPEG or PNG image (%zu bytes starting "
                "%02x %02x %02x %02x)", len, b[0], len > 1 ? b[1] : 0, len > 2 ? b[2] : 0,
                len > 3 ? b[3] : 0);
}
