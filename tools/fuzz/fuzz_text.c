/* fuzz_text.c — libFuzzer target for the tokenizers of libmx_text (core/text/mx_text.h):
 * a vocab.txt reader (mx_text_wordpiece_new), BERT's basic tokenizer and WordPiece
 * encoding, and GPT-2's byte-level BPE (mx_text_bpe_add building a table from the
 * input's lines, mx_text_bpe_encode through PCRE2's pre-tokenizer), on any bytes.
 *
 * Input: VOCAB "\0\0" TEXT (no separator: all TEXT, with a built-in vocabulary). Every
 * call must succeed or fail with MX_TEXT_EINVAL / MX_TEXT_ENOMEM and a message; the
 * counts must agree between a short buffer and a full one; ids must be vocabulary ids
 * and every offset a span inside the text. Anything else (a crash, a sanitizer report,
 * a leak) is a bug. Seeds: spec/fuzz_replay_spec.lua writes them (a small vocabulary
 * beside texts with accents, CJK, punctuation, control characters and bad UTF-8). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mx_text.h"

static const char BUILTIN[] = "[UNK]\n[CLS]\n[SEP]\nthe\nhello\nworld\n##s\n##ing\n##ed\nun\n"
                              "##believ\n##able\n,\n.\n!\na\nb\nc\n##a\n##b\n\xe4\xb8\xad\n";

static void fail(const char *what, int rc) {
  const char *msg = mx_text_last_error();
  if ((rc != MX_TEXT_EINVAL && rc != MX_TEXT_ENOMEM) || !msg || !*msg) {
    fprintf(stderr, "%s: unexpected failure: rc %d, message '%s'\n", what, rc, msg ? msg : "(null)");
    abort();
  }
}

static void check_spans(const char *what, const int64_t *sp, int64_t n, size_t len) {
  for (int64_t k = 0; k < n; k++) {
    if (sp[2 * k] < 0 || sp[2 * k] > sp[2 * k + 1] || sp[2 * k + 1] > (int64_t)len) {
      fprintf(stderr, "%s: span %lld is [%lld, %lld) of %zu bytes\n", what, (long long)k,
              (long long)sp[2 * k], (long long)sp[2 * k + 1], len);
      abort();
    }
  }
}

/* encode with 2 slots, then with as many as the first call said; both must agree */
static void wordpiece(const mx_text_wordpiece *w, const char *t, size_t len, int32_t nvocab) {
  int32_t ids2[2];
  int64_t off2[4], n = -1;
  int rc = mx_text_wordpiece_encode(w, t, len, ids2, off2, 2, &n);
  if (rc != MX_TEXT_OK) { fail("wordpiece_encode", rc); return; }
  if (n < 0) abort();
  int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n + 1));
  int64_t *off = malloc(sizeof(int64_t) * 2 * (size_t)(n + 1));
  int64_t n2 = -1;
  if (!ids || !off) abort();
  if (mx_text_wordpiece_encode(w, t, len, ids, off, n, &n2) != MX_TEXT_OK || n2 != n) abort();
  for (int64_t k = 0; k < n; k++) if (ids[k] < 0 || ids[k] >= nvocab) abort();
  check_spans("wordpiece_encode", off, n, len);
  free(ids);
  free(off);

  int64_t need = -1, nw = -1, sp2[4];
  char b2[4];
  rc = mx_text_basic_tokenize(w, t, len, b2, 4, &need, sp2, 2, &nw);
  if (rc != MX_TEXT_OK) { fail("basic_tokenize", rc); return; }
  if (need < 0 || nw < 0 || nw > need) abort();
  char *buf = malloc((size_t)need + 1);
  int64_t *sp = malloc(sizeof(int64_t) * 2 * (size_t)(nw + 1));
  int64_t need2 = -1, nw2 = -1;
  if (!buf || !sp) abort();
  if (mx_text_basic_tokenize(w, t, len, buf, need, &need2, sp, nw, &nw2) != MX_TEXT_OK ||
      need2 != need || nw2 != nw)
    abort();
  int64_t nul = 0;
  for (int64_t i = 0; i < need; i++) nul += buf[i] == 0;
  if (nul != nw) abort();
  check_spans("basic_tokenize", sp, nw, len);
  free(buf);
  free(sp);
}

static void bpe(const mx_text_bpe *b, const char *t, size_t len, int32_t maxid) {
  int32_t ids2[2];
  int64_t off2[4], n = -1;
  int rc = mx_text_bpe_encode(b, t, len, ids2, off2, 2, &n);
  if (rc != MX_TEXT_OK) { fail("bpe_encode", rc); return; }
  if (n < 0 || (len > 0 && n == 0) || n > (int64_t)len) abort();
  int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n + 1));
  int64_t *off = malloc(sizeof(int64_t) * 2 * (size_t)(n + 1));
  int64_t n2 = -1;
  if (!ids || !off) abort();
  if (mx_text_bpe_encode(b, t, len, ids, off, n, &n2) != MX_TEXT_OK || n2 != n) abort();
  for (int64_t k = 0; k < n; k++) if (ids[k] < 0 || ids[k] >= maxid) abort();
  check_spans("bpe_encode", off, n, len);
  free(ids);
  free(off);
}

/* a BPE table: the 256 single bytes (ids 0..255), then each line of `lines` as a
 * mergeable token (rank and id 256 + its line); *maxid: one past the last id */
static mx_text_bpe *bpe_of(const char *lines, size_t len, int32_t *maxid) {
  mx_text_bpe *b = NULL;
  int rc = mx_text_bpe_new(NULL, &b);
  if (rc != MX_TEXT_OK) { fail("bpe_new", rc); return NULL; }
  for (int i = 0; i < 256; i++) {
    char c = (char)i;
    if (mx_text_bpe_add(b, &c, 1, -1, i) != MX_TEXT_OK) abort();
  }
  int32_t id = 256;
  size_t s = 0;
  for (size_t i = 0; i <= len && id < 4096; i++) {
    if (i == len || lines[i] == '\n') {
      if (i > s) {
        rc = mx_text_bpe_add(b, lines + s, i - s, id, id);
        if (rc != MX_TEXT_OK) fail("bpe_add", rc);
        else if (mx_text_bpe_id(b, lines + s, i - s) < 0) abort();
        id++;
      }
      s = i + 1;
    }
  }
  *maxid = id;
  return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mx_text_wordpiece *fixed_w;
  static mx_text_bpe *fixed_b;
  static int32_t fixed_bmax;
  if (!fixed_w) {
    mx_text_wordpiece_opts o = { 1, -1, 1, 100 };
    if (mx_text_wordpiece_new(BUILTIN, sizeof BUILTIN - 1, "[UNK]", "##", &o, &fixed_w) != MX_TEXT_OK)
      abort();
    static const char merges[] = "th\nhe\nthe\nin\ning\n \xe4\n";
    fixed_b = bpe_of(merges, sizeof merges - 1, &fixed_bmax);
    if (!fixed_b) abort();
  }
  const char *d = (const char *)data;
  const char *text = d, *vocab = NULL;
  size_t tlen = size, vlen = 0;
  for (size_t i = 0; i + 1 < size; i++) {
    if (data[i] == 0 && data[i + 1] == 0) {
      vocab = d;
      vlen = i;
      text = d + i + 2;
      tlen = size - i - 2;
      break;
    }
  }
  wordpiece(fixed_w, text, tlen, 21);
  bpe(fixed_b, text, tlen, fixed_bmax);
  if (vocab) {
    /* the input's vocabulary: its first line is the unknown token, options from its
     * first byte */
    size_t e = 0;
    while (e < vlen && vocab[e] != '\n') e++;
    char unk[64];
    size_t ul = e < sizeof unk - 1 ? e : sizeof unk - 1;
    memcpy(unk, vocab, ul);
    unk[ul] = 0;
    int32_t lines = 1;
    for (size_t i = 0; i < vlen; i++) lines += vocab[i] == '\n';
    uint8_t f = vlen ? (uint8_t)vocab[0] : 0;
    mx_text_wordpiece_opts o = { f & 1, (f & 2) ? 1 : ((f & 4) ? 0 : -1), (f >> 3) & 1,
                                 (f & 16) ? 3 : 100 };
    mx_text_wordpiece *w = NULL;
    int rc = mx_text_wordpiece_new(vocab, vlen, unk, "##", &o, &w);
    if (rc != MX_TEXT_OK) {
      fail("wordpiece_new", rc);
      if (w) abort();
    } else {
      if (!w || mx_text_wordpiece_id(w, unk, strlen(unk)) < 0) abort();
      wordpiece(w, text, tlen, lines);
      mx_text_wordpiece_free(w);
    }
    int32_t bmax = 0;
    mx_text_bpe *b = bpe_of(vocab, vlen, &bmax);
    if (b) {
      bpe(b, text, tlen, bmax);
      mx_text_bpe_free(b);
    }
  }
  return 0;
}
