/* text_map.c — the tokenizers' byte-string map and the error buffer. */
#include <stdarg.h>
#include <stdio.h>

#include "text_internal.h"

static _Thread_local char err_buf[512];

const char *mx_text_last_error(void) { return err_buf; }

int mx_text_fail(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err_buf, sizeof err_buf, fmt, ap);
  va_end(ap);
  return code;
}

static int grow(text_map *m) {
  size_t ncap = m->cap ? m->cap * 2 : 1024;
  text_slot *ns = calloc(ncap, sizeof *ns);
  if (!ns) return MX_TEXT_ENOMEM;
  for (size_t i = 0; i < m->cap; i++) {
    text_slot *o = &m->slots[i];
    if (o->hash == 0) continue;
    size_t j = (size_t)o->hash & (ncap - 1);
    while (ns[j].hash != 0) j = (j + 1) & (ncap - 1);
    ns[j] = *o;
  }
  free(m->slots);
  m->slots = ns;
  m->cap = ncap;
  return 0;
}

int text_map_put(text_map *m, const char *s, size_t n, int32_t id, int64_t rank) {
  if (n > UINT32_MAX) return mx_text_fail(MX_TEXT_EINVAL, "token of %zu bytes is too long", n);
  if ((m->count + 1) * 2 > m->cap && grow(m) != 0)
    return mx_text_fail(MX_TEXT_ENOMEM, "out of memory growing a vocabulary of %zu", m->count);
  uint64_t h = text_hash(s, n);
  size_t mask = m->cap - 1, i = (size_t)h & mask;
  for (;; i = (i + 1) & mask) {
    text_slot *sl = &m->slots[i];
    if (sl->hash == 0) break;
    if (sl->hash == h && sl->len == n && memcmp(m->pool + sl->off, s, n) == 0) {
      sl->id = id;
      sl->rank = rank;
      return 0;
    }
  }
  if (m->pool_len + n > m->pool_cap) {
    size_t nc = m->pool_cap ? m->pool_cap : 4096;
    while (nc < m->pool_len + n) nc *= 2;
    if (nc > UINT32_MAX) return mx_text_fail(MX_TEXT_EINVAL, "vocabulary over 4 GiB");
    char *np = realloc(m->pool, nc);
    if (!np) return mx_text_fail(MX_TEXT_ENOMEM, "out of memory for vocabulary bytes");
    m->pool = np;
    m->pool_cap = nc;
  }
  if (n) memcpy(m->pool + m->pool_len, s, n);
  text_slot *sl = &m->slots[i];
  sl->hash = h;
  sl->off = (uint32_t)m->pool_len;
  sl->len = (uint32_t)n;
  sl->id = id;
  sl->rank = rank;
  m->pool_len += n;
  m->count++;
  return 0;
}

void text_map_free(text_map *m) {
  free(m->slots);
  free(m->pool);
  memset(m, 0, sizeof *m);
}

size_t text_utf8_check(const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t len;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; min = 0x10000; }
    else return i;
    if (n - i < len) return i;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return n;
}
