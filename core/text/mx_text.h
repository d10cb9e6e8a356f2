/* mx_text.h — libmx_text: the tokenizers behind mx.gluonnlp (BERT's basic + WordPiece,
 * GPT-2's byte-level BPE).
 *
 * A separate library from libmx: it links Debian's utf8proc (Unicode categories, NFD,
 * case mapping) and PCRE2 (the GPT-2 pre-tokenizer pattern, JIT-compiled), which an
 * app embedding only libmx does not need. Like mx.h, the region between MX_FFI_BEGIN
 * and MX_FFI_END is the exact text lua/mx/gluonnlp/_text.lua feeds to ffi.cdef.
 *
 * Conventions:
 *  - Fallible calls return MX_TEXT_OK (0) or a negative code; the message is in a
 *    thread-local buffer read with mx_text_last_error() (valid until the next failing
 *    call on that thread).
 *  - Text is UTF-8 bytes with an explicit length (NUL bytes are ordinary bytes).
 *    Offsets are 0-based byte offsets into the caller's text, end exclusive.
 *  - Encode calls write at most `cap` ids (and `cap` offset pairs when `offsets` is not
 *    NULL) and store the full count in *n: a caller seeing *n > cap calls again with
 *    larger buffers. Nothing is allocated per call except inside the tokenizer.
 *  - A tokenizer is immutable once built and may be used from several threads at once,
 *    except mx_text_bpe_add (building) which needs exclusive access.
 */
#ifndef MX_TEXT_H
#define MX_TEXT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* MX_FFI_BEGIN */
enum { MX_TEXT_OK = 0, MX_TEXT_EINVAL = -1, MX_TEXT_ENOMEM = -2 };

const char *mx_text_last_error(void);

/* ---- BERT: basic tokenizer + WordPiece ---------------------------------------------
 * Matches Hugging Face tokenizers' BERT normalizer and pre-tokenizer (what
 * transformers' BertTokenizer runs): drop NUL, U+FFFD and control characters,
 * whitespace to spaces, spaces around CJK ideographs (chinese_chars), split on
 * whitespace, strip accents (NFD then drop Mn; strip_accents 1/0, or -1: as lower),
 * lowercase (lower; full Unicode mapping, no final-sigma rule), split on punctuation,
 * then greedy longest-match-first WordPiece with `prefix` ("##") on continuations; a
 * word longer than max_chars characters or with no full cover becomes unk_id. */
typedef struct mx_text_wordpiece mx_text_wordpiece;
typedef struct mx_text_wordpiece_opts {
  int lower;
  int strip_accents;
  int chinese_chars;
  int32_t max_chars;
} mx_text_wordpiece_opts;

/* vocab: the bytes of vocab.txt (one token a line; line k (0-based) is id k; a repeated
 * token keeps its last line, as Python's dict does). unk: the unknown token's text,
 * which must be in the vocabulary. prefix: the continuation marker. *out: new, freed
 * with mx_text_wordpiece_free. */
int mx_text_wordpiece_new(const char *vocab, size_t vocab_len, const char *unk,
                          const char *prefix, const mx_text_wordpiece_opts *opts,
                          mx_text_wordpiece **out);
void mx_text_wordpiece_free(mx_text_wordpiece *w);
/* the id of one vocabulary entry, -1 if absent */
int32_t mx_text_wordpiece_id(const mx_text_wordpiece *w, const char *tok, size_t len);
/* text -> ids (and offsets[2k], offsets[2k+1] = the byte span of token k in text; an
 * unk word spans the whole word). Invalid UTF-8 is an error naming the byte offset. */
int mx_text_wordpiece_encode(const mx_text_wordpiece *w, const char *text, size_t len,
                             int32_t *ids, int64_t *offsets, int64_t cap, int64_t *n);
/* The basic tokenizer alone: the words (after cleaning, lowercasing, accent stripping,
 * punctuation splitting) written NUL-separated into buf (cap bytes); *n = bytes needed
 * (the words' bytes plus one NUL each); spans as in encode. */
int mx_text_basic_tokenize(const mx_text_wordpiece *w, const char *text, size_t len,
                           char *buf, int64_t cap, int64_t *n, int64_t *spans,
                           int64_t span_cap, int64_t *nwords);

/* ---- GPT-2: byte-level BPE ---------------------------------------------------------
 * The text is split by a pre-tokenizer pattern (PCRE2, UTF + Unicode properties, JIT),
 * each piece's bytes are merged by rank: repeatedly join the adjacent pair whose
 * concatenation has the lowest rank (tiktoken's algorithm; for GPT-2's files it equals
 * the merges.txt order). A token's id is the id given with its bytes. */
typedef struct mx_text_bpe mx_text_bpe;
/* pattern: a PCRE2 pattern, or NULL for GPT-2's. */
int mx_text_bpe_new(const char *pattern, mx_text_bpe **out);
void mx_text_bpe_free(mx_text_bpe *b);
/* one mergeable token: its bytes, its merge rank (lower merges first) and its id.
 * Every single byte 0..255 must be added before encoding. */
int mx_text_bpe_add(mx_text_bpe *b, const char *tok, size_t len, int64_t rank, int32_t id);
int32_t mx_text_bpe_id(const mx_text_bpe *b, const char *tok, size_t len);
int mx_text_bpe_encode(const mx_text_bpe *b, const char *text, size_t len, int32_t *ids,
                       int64_t *offsets, int64_t cap, int64_t *n);
/* MX_FFI_END */

#ifdef __cplusplus
}
#endif
#endif
