/* wordpiece.c — BERT's basic tokenizer and WordPiece (mx_text.h has the contract).
 *
 * One pass over the text's code points builds whitespace-separated words of
 * (code point, source span) entries; each word is accent-stripped and lowercased into
 * normalized entries that keep their source span, split at punctuation, and matched
 * greedily against the vocabulary. The spans make offsets exact even when
 * normalization changes lengths. */
#include <utf8proc.h>

#include "text_internal.h"

struct mx_text_wordpiece {
  text_map vocab;
  int32_t unk_id;
  char prefix[16];
  size_t prefix_len;
  size_t max_tok_bytes; /* longest vocabulary entry: bounds the match window */
  mx_text_wordpiece_opts o;
};

typedef struct cp_ent { int32_t cp; int64_t s, e; } cp_ent;

/* growable per-call scratch */
typedef struct scratch {
  cp_ent *word, *norm;
  size_t word_cap, norm_cap;
  char *bytes;
  size_t bytes_cap;
  uint32_t *pos;
  size_t pos_cap;
} scratch;

static int reserve(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t nc = *cap ? *cap : 64;
  while (nc < need) nc *= 2;
  void *np = realloc(*p, nc * elem);
  if (!np) return mx_text_fail(MX_TEXT_ENOMEM, "wordpiece: out of memory (%zu entries)", need);
  *p = np;
  *cap = nc;
  return 0;
}

static void scratch_free(scratch *s) {
  free(s->word);
  free(s->norm);
  free(s->bytes);
  free(s->pos);
}

static int is_control(int32_t cp, int cat) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return 0;
  return cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
         cat == UTF8PROC_CATEGORY_CS || cat == UTF8PROC_CATEGORY_CO ||
         cat == UTF8PROC_CATEGORY_CN;
}

/* cleaned to a space (Python: " \t\n\r" or Zs) */
static int is_space(int32_t cp, int cat) {
  return cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || cat == UTF8PROC_CATEGORY_ZS;
}

/* kept by cleaning but still a separator for str.split() (line/paragraph separators) */
static int is_split_space(int cat) {
  return cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
}

static int is_punct(int32_t cp) {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
      (cp >= 123 && cp <= 126))
    return 1;
  if (cp < 128) return 0;
  int cat = utf8proc_category(cp);
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

static int is_cjk(int32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

static int push_norm(scratch *s, size_t *nn, int32_t cp, int64_t a, int64_t b) {
  if (reserve((void **)&s->norm, &s->norm_cap, *nn + 1, sizeof(cp_ent))) return MX_TEXT_ENOMEM;
  s->norm[(*nn)++] = (cp_ent){cp, a, b};
  return 0;
}

/* lowercase one code point onto s->norm (Unicode's full mapping: U+0130 is the one
 * code point whose lowercase is two) */
static int push_lower(const mx_text_wordpiece *w, scratch *s, size_t *nn, int32_t c,
                      int64_t a, int64_t b) {
  if (!w->o.lower) return push_norm(s, nn, c, a, b);
  if (c < 128) return push_norm(s, nn, (c >= 'A' && c <= 'Z') ? c + 32 : c, a, b);
  if (c == 0x130) return push_norm(s, nn, 'i', a, b) || push_norm(s, nn, 0x307, a, b);
  return push_norm(s, nn, utf8proc_tolower(c), a, b);
}

/* the word's entries accent-stripped, then lowercased, into s->norm (the order of
 * Hugging Face tokenizers' BertNormalizer) */
static int normalize_word(const mx_text_wordpiece *w, scratch *s, size_t nw, size_t *nn) {
  int strip = w->o.strip_accents < 0 ? w->o.lower : w->o.strip_accents;
  *nn = 0;
  for (size_t i = 0; i < nw; i++) {
    cp_ent e = s->word[i];
    if (!strip || e.cp < 128) {
      if (push_lower(w, s, nn, e.cp, e.s, e.e)) return MX_TEXT_ENOMEM;
      continue;
    }
    utf8proc_int32_t dec[32];
    int boundclass = 0;
    utf8proc_ssize_t nd = utf8proc_decompose_char(e.cp, dec, 32, UTF8PROC_DECOMPOSE, &boundclass);
    if (nd < 0 || nd > 32) {
      dec[0] = e.cp;
      nd = 1;
    }
    for (utf8proc_ssize_t d = 0; d < nd; d++) {
      if (utf8proc_category(dec[d]) == UTF8PROC_CATEGORY_MN) continue;
      if (push_lower(w, s, nn, dec[d], e.s, e.e)) return MX_TEXT_ENOMEM;
    }
  }
  return 0;
}

static size_t put_utf8(char *dst, int32_t cp) {
  return (size_t)utf8proc_encode_char(cp, (utf8proc_uint8_t *)dst);
}

typedef struct sink {
  int32_t *ids;
  int64_t *offs;
  int64_t cap, n;
  /* basic-tokenize mode: words as bytes */
  char *buf;
  int64_t buf_cap, buf_n;
} sink;

static void emit(sink *k, int32_t id, int64_t a, int64_t b) {
  if (k->n < k->cap) {
    if (k->ids) k->ids[k->n] = id;
    if (k->offs) {
      k->offs[2 * k->n] = a;
      k->offs[2 * k->n + 1] = b;
    }
  }
  k->n++;
}

/* WordPiece over entries ent[0..n) (one punctuation-free word, or one punctuation mark) */
static int piece_word(const mx_text_wordpiece *w, scratch *s, const cp_ent *ent, size_t n,
                      sink *k) {
  if (n == 0) return 0;
  if (k->buf) { /* basic tokenizer only */
    char tmp[4];
    for (size_t i = 0; i < n; i++) {
      size_t l = put_utf8(tmp, ent[i].cp);
      for (size_t j = 0; j < l; j++) {
        if (k->buf_n < k->buf_cap) k->buf[k->buf_n] = tmp[j];
        k->buf_n++;
      }
    }
    if (k->buf_n < k->buf_cap) k->buf[k->buf_n] = 0;
    k->buf_n++;
    emit(k, -1, ent[0].s, ent[n - 1].e);
    return 0;
  }
  if ((int64_t)n > w->o.max_chars) {
    emit(k, w->unk_id, ent[0].s, ent[n - 1].e);
    return 0;
  }
  /* the word's bytes, each code point's byte start, and a key buffer for "##piece" */
  size_t need = 4 * n + w->max_tok_bytes + w->prefix_len + 1;
  if (reserve((void **)&s->bytes, &s->bytes_cap, need, 1) ||
      reserve((void **)&s->pos, &s->pos_cap, n + 1, sizeof(uint32_t)))
    return MX_TEXT_ENOMEM;
  char *wb = s->bytes, *key = s->bytes + 4 * n;
  uint32_t *pos = s->pos;
  size_t len = 0;
  for (size_t i = 0; i < n; i++) {
    pos[i] = (uint32_t)len;
    len += put_utf8(wb + len, ent[i].cp);
  }
  pos[n] = (uint32_t)len;
  memcpy(key, w->prefix, w->prefix_len);
  int64_t first = k->n;
  size_t start = 0;
  while (start < n) {
    size_t plen = start > 0 ? w->prefix_len : 0;
    size_t end = n;
    const text_slot *hit = NULL;
    /* no vocabulary entry is longer than max_tok_bytes: skip those lookups */
    while (end > start && pos[end] - pos[start] + plen > w->max_tok_bytes) end--;
    for (; end > start; end--) {
      size_t bl = pos[end] - pos[start];
      if (plen) {
        memcpy(key + plen, wb + pos[start], bl);
        hit = text_map_get(&w->vocab, key, plen + bl);
      } else {
        hit = text_map_get(&w->vocab, wb + pos[start], bl);
      }
      if (hit) break;
    }
    if (!hit) {
      k->n = first;
      emit(k, w->unk_id, ent[0].s, ent[n - 1].e);
      return 0;
    }
    emit(k, hit->id, ent[start].s, ent[end - 1].e);
    start = end;
  }
  return 0;
}

/* the word's normalized entries, split at punctuation, through piece_word */
static int finish_word(const mx_text_wordpiece *w, scratch *s, size_t nw, sink *k) {
  if (nw == 0) return 0;
  size_t nn;
  int rc = normalize_word(w, s, nw, &nn);
  if (rc) return rc;
  size_t run = 0;
  for (size_t i = 0; i < nn; i++) {
    if (is_punct(s->norm[i].cp)) {
      if ((rc = piece_word(w, s, s->norm + run, i - run, k))) return rc;
      if ((rc = piece_word(w, s, s->norm + i, 1, k))) return rc;
      run = i + 1;
    }
  }
  return piece_word(w, s, s->norm + run, nn - run, k);
}

static int run(const mx_text_wordpiece *w, const char *text, size_t len, sink *k) {
  scratch s = {0};
  size_t nw = 0;
  int rc = 0;
  const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)text;
  size_t i = 0;
  while (i < len) {
    int32_t cp;
    size_t l;
    if (p[i] < 0x80) {
      cp = p[i];
      l = 1;
    } else {
      utf8proc_int32_t c;
      utf8proc_ssize_t r = utf8proc_iterate(p + i, (utf8proc_ssize_t)(len - i), &c);
      if (r < 0) {
        rc = mx_text_fail(MX_TEXT_EINVAL, "tokenizer: invalid UTF-8 at byte %zu", i + 1);
        goto done;
      }
      cp = c;
      l = (size_t)r;
    }
    int cat = cp < 128 ? (cp < 32 || cp == 127 ? UTF8PROC_CATEGORY_CC : UTF8PROC_CATEGORY_LL)
                       : (int)utf8proc_category(cp);
    if (cp == 0 || cp == 0xFFFD || is_control(cp, cat)) {
      i += l;
      continue;
    }
    if (is_space(cp, cat) || is_split_space(cat)) {
      if ((rc = finish_word(w, &s, nw, k))) goto done;
      nw = 0;
    } else if (w->o.chinese_chars && cp >= 0x3400 && is_cjk(cp)) {
      if ((rc = finish_word(w, &s, nw, k))) goto done;
      nw = 0;
      if (reserve((void **)&s.word, &s.word_cap, 1, sizeof(cp_ent))) {
        rc = MX_TEXT_ENOMEM;
        goto done;
      }
      s.word[0] = (cp_ent){cp, (int64_t)i, (int64_t)(i + l)};
      if ((rc = finish_word(w, &s, 1, k))) goto done;
    } else {
      if (reserve((void **)&s.word, &s.word_cap, nw + 1, sizeof(cp_ent))) {
        rc = MX_TEXT_ENOMEM;
        goto done;
      }
      s.word[nw++] = (cp_ent){cp, (int64_t)i, (int64_t)(i + l)};
    }
    i += l;
  }
  rc = finish_word(w, &s, nw, k);
done:
  scratch_free(&s);
  return rc;
}

int mx_text_wordpiece_new(const char *vocab, size_t vocab_len, const char *unk,
                          const char *prefix, const mx_text_wordpiece_opts *opts,
                          mx_text_wordpiece **out) {
  if (!vocab || !unk || !prefix || !opts || !out)
    return mx_text_fail(MX_TEXT_EINVAL, "wordpiece: NULL argument");
  *out = NULL;
  if (strlen(prefix) >= sizeof(((mx_text_wordpiece *)0)->prefix))
    return mx_text_fail(MX_TEXT_EINVAL, "wordpiece: prefix '%s' is over 15 bytes", prefix);
  if (opts->max_chars < 1)
    return mx_text_fail(MX_TEXT_EINVAL, "wordpiece: max_chars must be >= 1, got %d",
                        (int)opts->max_chars);
  mx_text_wordpiece *w = calloc(1, sizeof *w);
  if (!w) return mx_text_fail(MX_TEXT_ENOMEM, "wordpiece: out of memory");
  w->o = *opts;
  w->prefix_len = strlen(prefix);
  memcpy(w->prefix, prefix, w->prefix_len);
  int32_t id = 0;
  size_t i = 0;
  while (i < vocab_len) {
    size_t j = i;
    while (j < vocab_len && vocab[j] != '\n') j++;
    if (j == vocab_len && j == i) break; /* no empty last line after a final newline */
    int rc = text_map_put(&w->vocab, vocab + i, j - i, id, id);
    if (rc) {
      mx_text_wordpiece_free(w);
      return rc;
    }
    if (j - i > w->max_tok_bytes) w->max_tok_bytes = j - i;
    if (id == INT32_MAX) {
      mx_text_wordpiece_free(w);
      return mx_text_fail(MX_TEXT_EINVAL, "wordpiece: vocabulary over 2^31 lines");
    }
    id++;
    i = j + 1;
  }
  if (w->vocab.count == 0) {
    mx_text_wordpiece_free(w);
    return mx_text_fail(MX_TEXT_EINVAL, "wordpiece: the vocabulary is empty");
  }
  const text_slot *u = text_map_get(&w->vocab, unk, strlen(unk));
  if (!u) {
    mx_text_wordpiece_free(w);
    return mx_text_fail(MX_TEXT_EINVAL, "wordpiece: unknown token '%s' is not in the vocabulary",
                        unk);
  }
  w->unk_id = u->id;
  *out = w;
  return 0;
}

void mx_text_wordpiece_free(mx_text_wordpiece *w) {
  if (!w) return;
  text_map_free(&w->vocab);
  free(w);
}

int32_t mx_text_wordpiece_id(const mx_text_wordpiece *w, const char *tok, size_t len) {
  const text_slot *s = w ? text_map_get(&w->vocab, tok, len) : NULL;
  return s ? s->id : -1;
}

int mx_text_wordpiece_encode(const mx_text_wordpiece *w, const char *text, size_t len,
                             int32_t *ids, int64_t *offsets, int64_t cap, int64_t *n) {
  if (!w || (!text && len) || !n || cap < 0 || (cap > 0 && !ids))
    return mx_text_fail(MX_TEXT_EINVAL, "wordpiece encode: bad arguments");
  sink k = {ids, offsets, cap, 0, NULL, 0, 0};
  int rc = run(w, text, len, &k);
  *n = k.n;
  return rc;
}

int mx_text_basic_tokenize(const mx_text_wordpiece *w, const char *text, size_t len,
                           char *buf, int64_t cap, int64_t *n, int64_t *spans,
                           int64_t span_cap, int64_t *nwords) {
  if (!w || (!text && len) || !n || !nwords || cap < 0 || span_cap < 0 || (cap > 0 && !buf))
    return mx_text_fail(MX_TEXT_EINVAL, "basic tokenize: bad arguments");
  char dummy;
  sink k = {NULL, spans, span_cap, 0, buf ? buf : &dummy, buf ? cap : 0, 0};
  int rc = run(w, text, len, &k);
  *n = k.buf_n;
  *nwords = k.n;
  return rc;
}
