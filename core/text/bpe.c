/* bpe.c — byte-level BPE (GPT-2) with a PCRE2 pre-tokenizer (mx_text.h has the contract).
 *
 * Merging follows tiktoken: a piece that is itself a token is emitted whole; otherwise
 * its bytes start as single-byte parts and the adjacent pair whose joined bytes have the
 * lowest rank is merged until no joined pair is a token. Pieces are short (a word and
 * its leading space), so the quadratic scan beats keeping a heap. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "text_internal.h"

/* GPT-2's pre-tokenizer (tiktoken's r50k/gpt2 pattern) */
static const char GPT2_PATTERN[] =
    "'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

struct mx_text_bpe {
  text_map tokens;
  size_t max_tok_bytes;
  pcre2_code *re;
  int jit;
};

int mx_text_bpe_new(const char *pattern, mx_text_bpe **out) {
  if (!out) return mx_text_fail(MX_TEXT_EINVAL, "bpe: NULL out");
  *out = NULL;
  mx_text_bpe *b = calloc(1, sizeof *b);
  if (!b) return mx_text_fail(MX_TEXT_ENOMEM, "bpe: out of memory");
  const char *pat = pattern ? pattern : GPT2_PATTERN;
  int err;
  PCRE2_SIZE eoff;
  b->re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err,
                        &eoff, NULL);
  if (!b->re) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    free(b);
    return mx_text_fail(MX_TEXT_EINVAL, "bpe: pattern error at offset %zu: %s", (size_t)eoff,
                        (const char *)msg);
  }
  b->jit = pcre2_jit_compile(b->re, PCRE2_JIT_COMPLETE) == 0;
  *out = b;
  return 0;
}

void mx_text_bpe_free(mx_text_bpe *b) {
  if (!b) return;
  text_map_free(&b->tokens);
  pcre2_code_free(b->re);
  free(b);
}

int mx_text_bpe_add(mx_text_bpe *b, const char *tok, size_t len, int64_t rank, int32_t id) {
  if (!b || (!tok && len)) return mx_text_fail(MX_TEXT_EINVAL, "bpe add: bad arguments");
  if (len == 0) return mx_text_fail(MX_TEXT_EINVAL, "bpe add: empty token (id %d)", (int)id);
  int rc = text_map_put(&b->tokens, tok, len, id, rank);
  if (rc) return rc;
  if (len > b->max_tok_bytes) b->max_tok_bytes = len;
  return 0;
}

int32_t mx_text_bpe_id(const mx_text_bpe *b, const char *tok, size_t len) {
  const text_slot *s = b ? text_map_get(&b->tokens, tok, len) : NULL;
  return s ? s->id : -1;
}

typedef struct part { size_t start; int64_t rank; } part;

static int64_t pair_rank(const mx_text_bpe *b, const char *p, const part *parts, size_t np,
                         size_t i) {
  if (i + 2 >= np) return INT64_MAX;
  size_t a = parts[i].start, e = parts[i + 2].start;
  if (e - a > b->max_tok_bytes) return INT64_MAX;
  const text_slot *s = text_map_get(&b->tokens, p + a, e - a);
  return s ? s->rank : INT64_MAX;
}

typedef struct out_buf { int32_t *ids; int64_t *offs; int64_t cap, n; } out_buf;

static void emit(out_buf *o, int32_t id, size_t a, size_t e) {
  if (o->n < o->cap) {
    o->ids[o->n] = id;
    if (o->offs) {
      o->offs[2 * o->n] = (int64_t)a;
      o->offs[2 * o->n + 1] = (int64_t)e;
    }
  }
  o->n++;
}

/* the piece text[a, e) as tokens; parts: scratch of at least e - a + 1 entries */
static int merge_piece(const mx_text_bpe *b, const char *text, size_t a, size_t e, part *parts,
                       out_buf *o) {
  const text_slot *whole = text_map_get(&b->tokens, text + a, e - a);
  if (whole) {
    emit(o, whole->id, a, e);
    return 0;
  }
  const char *p = text + a;
  size_t n = e - a, np = n + 1;
  for (size_t i = 0; i < np; i++) parts[i] = (part){i, INT64_MAX};
  for (size_t i = 0; i + 2 < np; i++) parts[i].rank = pair_rank(b, p, parts, np, i);
  while (np > 2) {
    int64_t best = INT64_MAX;
    size_t bi = 0;
    for (size_t i = 0; i + 1 < np; i++)
      if (parts[i].rank < best) {
        best = parts[i].rank;
        bi = i;
      }
    if (best == INT64_MAX) break;
    memmove(parts + bi + 1, parts + bi + 2, (np - bi - 2) * sizeof *parts);
    np--;
    parts[bi].rank = pair_rank(b, p, parts, np, bi);
    if (bi > 0) parts[bi - 1].rank = pair_rank(b, p, parts, np, bi - 1);
  }
  for (size_t i = 0; i + 1 < np; i++) {
    size_t s = parts[i].start, t = parts[i + 1].start;
    const text_slot *tok = text_map_get(&b->tokens, p + s, t - s);
    if (!tok)
      return mx_text_fail(MX_TEXT_EINVAL,
                          "bpe: byte 0x%02x (text byte %zu) is not a token: add all 256 bytes",
                          (unsigned char)p[s], a + s + 1);
    emit(o, tok->id, a + s, a + t);
  }
  return 0;
}

int mx_text_bpe_encode(const mx_text_bpe *b, const char *text, size_t len, int32_t *ids,
                       int64_t *offsets, int64_t cap, int64_t *n) {
  if (!b || (!text && len) || !n || cap < 0 || (cap > 0 && !ids))
    return mx_text_fail(MX_TEXT_EINVAL, "bpe encode: bad arguments");
  *n = 0;
  if (len == 0) return 0;
  /* the JIT matcher skips PCRE2's UTF check: validate once here */
  size_t bad = text_utf8_check(text, len);
  if (bad < len) return mx_text_fail(MX_TEXT_EINVAL, "tokenizer: invalid UTF-8 at byte %zu", bad + 1);
  out_buf o = {ids, offsets, cap, 0};
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(b->re, NULL);
  if (!md) return mx_text_fail(MX_TEXT_ENOMEM, "bpe: out of memory");
  part *parts = NULL;
  size_t parts_cap = 0;
  int rc = 0;
  size_t pos = 0;
  const uint32_t flags = PCRE2_NO_UTF_CHECK;
  while (pos < len) {
    int m = b->jit ? pcre2_jit_match(b->re, (PCRE2_SPTR)text, len, pos, flags, md, NULL)
                   : pcre2_match(b->re, (PCRE2_SPTR)text, len, pos, flags, md, NULL);
    if (m < 0) {
      if (m == PCRE2_ERROR_NOMATCH) break;
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(m, msg, sizeof msg);
      rc = mx_text_fail(MX_TEXT_EINVAL, "bpe: %s at byte %zu", (const char *)msg,
                        (size_t)pcre2_get_startchar(md) + 1);
      break;
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t a = ov[0], e = ov[1];
    if (e <= a) { /* a pattern that matches empty: step one byte on */
      pos = a + 1;
      continue;
    }
    if (e - a + 1 > parts_cap) {
      size_t nc = parts_cap ? parts_cap : 64;
      while (nc < e - a + 1) nc *= 2;
      part *np = realloc(parts, nc * sizeof *np);
      if (!np) {
        rc = mx_text_fail(MX_TEXT_ENOMEM, "bpe: out of memory for a %zu-byte piece", e - a);
        break;
      }
      parts = np;
      parts_cap = nc;
    }
    if ((rc = merge_piece(b, text, a, e, parts, &o))) break;
    pos = e;
  }
  free(parts);
  pcre2_match_data_free(md);
  *n = o.n;
  return rc;
}
