/* text_internal.h — what the tokenizers share: the error buffer and a byte-string ->
 * (id, rank) map (open addressing, keys in one byte pool, load factor <= 1/2). */
#ifndef MX_TEXT_INTERNAL_H
#define MX_TEXT_INTERNAL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mx_text.h"

int mx_text_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef struct text_slot {
  uint64_t hash;     /* 0: empty */
  uint32_t off, len; /* key bytes in pool */
  int32_t id;
  int64_t rank;
} text_slot;

typedef struct text_map {
  text_slot *slots;
  size_t cap;   /* power of two */
  size_t count;
  char *pool;
  size_t pool_len, pool_cap;
} text_map;

/* FNV-1a, never 0 (0 marks an empty slot) */
static inline uint64_t text_hash(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h ? h : 1;
}

static inline const text_slot *text_map_get(const text_map *m, const char *s, size_t n) {
  if (m->cap == 0) return NULL;
  uint64_t h = text_hash(s, n);
  size_t mask = m->cap - 1;
  for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
    const text_slot *sl = &m->slots[i];
    if (sl->hash == 0) return NULL;
    if (sl->hash == h && sl->len == n && memcmp(m->pool + sl->off, s, n) == 0) return sl;
  }
}

/* the byte offset of the first invalid UTF-8 sequence in s[0, n) (overlong forms,
 * surrogates and code points past U+10FFFF are invalid), or n when s is valid */
size_t text_utf8_check(const char *s, size_t n);

/* insert or overwrite; 0 or MX_TEXT_ENOMEM */
int text_map_put(text_map *m, const char *s, size_t n, int32_t id, int64_t rank);
void text_map_free(text_map *m);

#endif
