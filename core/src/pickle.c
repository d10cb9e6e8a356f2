/* pickle.c — the restricted unpickler of pickle.h: protocols 0-5 for data only.
 *
 * Python's VM (Lib/pickle.py, "Unpickler"): a stack of values with marks, a memo, and
 * opcodes that build values. What can run code is refused or delegated: GLOBAL and
 * STACK_GLOBAL only name something and the caller's allowlist decides; REDUCE applies
 * only a global the allowlist accepted, through the caller's hook, which builds data
 * (never calls anything named by the file); BUILD goes to a hook that may only record
 * state; INST, OBJ, NEWOBJ, NEWOBJ_EX, the extension registry (EXT1/2/4) and out-of-band
 * buffers are errors naming the opcode. Every length read is checked against the bytes
 * left before anything is copied or allocated (strings point into the input), the memo
 * index is bounded by the input's size, and the number of values by four per input byte,
 * so no input makes the VM use more than a small multiple of its own size. */
#include "pickle.h"

#include "ndfile_read.h"
#include "xfile.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pk_vm {
  const uint8_t *p;
  size_t len, pos, op_pos;
  const char *who, *file;
  pk_hooks h;
  pk_val **stack;
  size_t sp, scap;
  size_t *marks;
  size_t nmarks, mcap;
  pk_val **memo;
  size_t memo_cap, memo_n; /* memo_n: indices set (Python's len(memo)) */
  pk_val *allocs;
  size_t nvals, max_vals;
};

int pk_fail(const pk_vm *vm, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return mx_err(MX_EFORMAT, "%s: %s: pickle at byte %zu: %s", vm->who, vm->file, vm->op_pos, msg);
}

pk_vm *pk_vm_new(const uint8_t *p, size_t len, const char *who, const char *file,
                 const pk_hooks *hooks) {
  pk_vm *vm = calloc(1, sizeof *vm);
  if (!vm) return NULL;
  vm->p = p, vm->len = len, vm->who = who, vm->file = file, vm->h = *hooks;
  vm->max_vals = 4 * len + 1024;
  return vm;
}

void pk_vm_free(pk_vm *vm) {
  if (!vm) return;
  for (pk_val *v = vm->allocs, *nx; v; v = nx) {
    nx = v->next_alloc;
    free(v->a);
    free(v);
  }
  free(vm->stack);
  free(vm->marks);
  free(vm->memo);
  free(vm);
}

size_t pk_pos(const pk_vm *vm) { return vm->pos; }
void pk_seek(pk_vm *vm, size_t pos) { vm->pos = pos <= vm->len ? pos : vm->len; }

pk_val *pk_new(pk_vm *vm, pk_kind k) {
  if (vm->nvals >= vm->max_vals) return NULL;
  pk_val *v = calloc(1, sizeof *v);
  if (!v) return NULL;
  v->k = k;
  v->next_alloc = vm->allocs;
  vm->allocs = v;
  vm->nvals++;
  return v;
}

bool pk_is_str(const pk_val *v, const char *s) {
  return v && v->k == PK_STR && v->n == strlen(s) && memcmp(v->s, s, v->n) == 0;
}

/* ---- stack, marks, memo ------------------------------------------------------------- */

static int nomem(const pk_vm *vm) {
  if (vm->nvals >= vm->max_vals) return pk_fail(vm, "more values than the input can describe");
  return mx_err(MX_ENOMEM, "%s: %s: out of memory unpickling", vm->who, vm->file);
}

static int push(pk_vm *vm, pk_val *v) {
  if (!v) return nomem(vm);
  if (vm->sp == vm->scap) {
    size_t nc = vm->scap ? 2 * vm->scap : 64;
    pk_val **ns = realloc(vm->stack, nc * sizeof *ns);
    if (!ns) return nomem(vm);
    vm->stack = ns, vm->scap = nc;
  }
  vm->stack[vm->sp++] = v;
  return MX_OK;
}

static int pop(pk_vm *vm, pk_val **v) {
  *v = NULL;
  if (vm->sp == 0 || (vm->nmarks && vm->sp <= vm->marks[vm->nmarks - 1]))
    return pk_fail(vm, "the stack is empty (or at a mark) where a value is needed");
  *v = vm->stack[--vm->sp];
  return MX_OK;
}

static int top(pk_vm *vm, pk_val **v) {
  *v = NULL;
  if (vm->sp == 0 || (vm->nmarks && vm->sp <= vm->marks[vm->nmarks - 1]))
    return pk_fail(vm, "the stack is empty where a value is needed");
  *v = vm->stack[vm->sp - 1];
  return MX_OK;
}

static int pop_mark(pk_vm *vm, size_t *from) {
  *from = 0;
  if (vm->nmarks == 0) return pk_fail(vm, "no MARK to go back to");
  *from = vm->marks[--vm->nmarks];
  return MX_OK;
}

static int seq_append(pk_vm *vm, pk_val *s, pk_val *v) {
  if (s->n == s->cap) {
    size_t nc = s->cap ? 2 * s->cap : 4;
    pk_val **na = realloc(s->a, nc * sizeof *na);
    if (!na) return nomem(vm);
    s->a = na, s->cap = nc;
  }
  s->a[s->n++] = v;
  return MX_OK;
}

/* A tuple/list of the items above the last mark (removed from the stack). */
static int collect(pk_vm *vm, pk_kind k, pk_val **out) {
  size_t from;
  int rc = pop_mark(vm, &from);
  if (rc) return rc;
  pk_val *v = pk_new(vm, k);
  if (!v) return nomem(vm);
  for (size_t i = from; i < vm->sp; i++)
    if ((rc = seq_append(vm, v, vm->stack[i]))) return rc;
  vm->sp = from;
  *out = v;
  return MX_OK;
}

static int memo_put(pk_vm *vm, uint64_t idx) {
  pk_val *v;
  int rc = top(vm, &v);
  if (rc) return rc;
  if (idx >= vm->len + 1 || idx >= (1u << 26))
    return pk_fail(vm, "memo index %llu beyond what the input can hold", (unsigned long long)idx);
  if (idx >= vm->memo_cap) {
    size_t nc = vm->memo_cap ? vm->memo_cap : 64;
    while (nc <= idx) nc *= 2;
    pk_val **nm = realloc(vm->memo, nc * sizeof *nm);
    if (!nm) return nomem(vm);
    memset(nm + vm->memo_cap, 0, (nc - vm->memo_cap) * sizeof *nm);
    vm->memo = nm, vm->memo_cap = nc;
  }
  if (!vm->memo[idx]) vm->memo_n++;
  vm->memo[idx] = v;
  return MX_OK;
}

static int memo_get(pk_vm *vm, uint64_t idx) {
  if (idx >= vm->memo_cap || !vm->memo[idx])
    return pk_fail(vm, "memo index %llu was never set", (unsigned long long)idx);
  return push(vm, vm->memo[idx]);
}

/* ---- reading the input ------------------------------------------------------------- */

static int need(pk_vm *vm, size_t n, const char *what) {
  if (vm->len - vm->pos < n)
    return pk_fail(vm, "%s needs %zu bytes but only %zu are left", what, n, vm->len - vm->pos);
  return MX_OK;
}

static uint64_t le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static int rd_uint(pk_vm *vm, int n, uint64_t *v, const char *what) {
  int rc = need(vm, (size_t)n, what);
  if (rc) return rc;
  *v = le(vm->p + vm->pos, n);
  vm->pos += (size_t)n;
  return MX_OK;
}

/* A text line (protocol 0 arguments), without its newline. */
static int rd_line(pk_vm *vm, const char **s, size_t *n, const char *what) {
  const uint8_t *b = vm->p + vm->pos, *nl = memchr(b, '\n', vm->len - vm->pos);
  if (!nl) return pk_fail(vm, "%s: no newline before the end of the input", what);
  *s = (const char *)b, *n = (size_t)(nl - b);
  vm->pos += *n + 1;
  return MX_OK;
}

static int push_str(pk_vm *vm, pk_kind k, uint64_t n, const char *what) {
  int rc = need(vm, n, what);
  if (rc) return rc;
  const char *s = (const char *)vm->p + vm->pos;
  if (k == PK_STR && !mx_utf8_valid((const uint8_t *)s, (size_t)n))
    return pk_fail(vm, "%s is not valid UTF-8", what);
  pk_val *v = pk_new(vm, k);
  if (!v) return nomem(vm);
  v->s = s, v->n = (size_t)n;
  vm->pos += (size_t)n;
  return push(vm, v);
}

static int push_int(pk_vm *vm, int64_t i) {
  pk_val *v = pk_new(vm, PK_INT);
  if (!v) return nomem(vm);
  v->i = i;
  return push(vm, v);
}

/* LONG1/LONG4: n bytes of little-endian two's complement; ints of up to 8 bytes are
 * PK_INT, longer ones PK_BIGINT (raw bytes: a magic number to compare, not a value). */
static int push_long(pk_vm *vm, uint64_t n) {
  int rc = need(vm, n, "a long's bytes");
  if (rc) return rc;
  const uint8_t *b = vm->p + vm->pos;
  pk_val *v;
  if (n <= 8) {
    uint64_t u = n ? le(b, (int)n) : 0;
    if (n && n < 8 && (b[n - 1] & 0x80)) u |= ~0ull << (8 * n); /* sign-extend */
    if (!(v = pk_new(vm, PK_INT))) return nomem(vm);
    memcpy(&v->i, &u, 8);
  } else {
    if (!(v = pk_new(vm, PK_BIGINT))) return nomem(vm);
    v->s = (const char *)b, v->n = (size_t)n;
  }
  vm->pos += (size_t)n;
  return push(vm, v);
}

static int do_global(pk_vm *vm, const char *mod, size_t mlen, const char *name, size_t nlen) {
  char m[256], nm[256];
  if (mlen >= sizeof m || nlen >= sizeof nm || memchr(mod, 0, mlen) || memchr(name, 0, nlen)) {
    char pb[80];
    return pk_fail(vm, "global '%s...' is not allowed", mx_ndf_printable(pb, sizeof pb, mod, mlen));
  }
  memcpy(m, mod, mlen), m[mlen] = 0;
  memcpy(nm, name, nlen), nm[nlen] = 0;
  int64_t id;
  int rc = vm->h.global(vm->h.ctx, m, nm, &id);
  if (rc) return rc;
  pk_val *v = pk_new(vm, PK_GLOBAL);
  if (!v) return nomem(vm);
  v->i = id;
  return push(vm, v);
}

static int set_items(pk_vm *vm, pk_val *d, pk_val *const *kv, size_t n) {
  if (d->k != PK_DICT) return pk_fail(vm, "SETITEM(S) on something that is not a dict");
  int rc = MX_OK;
  for (size_t i = 0; i + 1 < n && !rc; i += 2) {
    /* a repeated key replaces the value, as in Python (str and int keys compared) */
    pk_val *k = kv[i];
    size_t j = 0;
    for (; j < d->n; j += 2) {
      pk_val *o = d->a[j];
      if (o->k == k->k && ((k->k == PK_STR && o->n == k->n && memcmp(o->s, k->s, k->n) == 0) ||
                           (k->k == PK_INT && o->i == k->i)))
        break;
      if (o == k) break;
    }
    if (j < d->n) d->a[j + 1] = kv[i + 1];
    else if (!(rc = seq_append(vm, d, k))) rc = seq_append(vm, d, kv[i + 1]);
  }
  return rc;
}

/* ---- the loop ------------------------------------------------------------------------ */

int pk_load(pk_vm *vm, pk_val **out) {
  *out = NULL;
  vm->sp = 0, vm->nmarks = 0;
  int rc = MX_OK;
  while (!rc) {
    vm->op_pos = vm->pos;
    if (vm->pos >= vm->len) return pk_fail(vm, "the input ends before STOP");
    uint8_t op = vm->p[vm->pos++];
    uint64_t u = 0;
    pk_val *v = NULL, *w = NULL;
    const char *s = NULL;
    size_t n = 0;
    switch (op) {
    case 0x80: /* PROTO */
      if ((rc = rd_uint(vm, 1, &u, "PROTO"))) break;
      if (u > 5) rc = pk_fail(vm, "pickle protocol %llu is newer than 5", (unsigned long long)u);
      break;
    case 0x95: /* FRAME: a length hint; the data follows inline */
      rc = rd_uint(vm, 8, &u, "FRAME");
      break;
    case '.': /* STOP */
      if ((rc = pop(vm, &v))) break;
      *out = v;
      return MX_OK;
    case '(': /* MARK */
      if (vm->nmarks == vm->mcap) {
        size_t nc = vm->mcap ? 2 * vm->mcap : 16;
        size_t *nm = realloc(vm->marks, nc * sizeof *nm);
        if (!nm) { rc = nomem(vm); break; }
        vm->marks = nm, vm->mcap = nc;
      }
      vm->marks[vm->nmarks++] = vm->sp;
      break;
    case '0': /* POP */
      if (vm->nmarks && vm->sp == vm->marks[vm->nmarks - 1]) vm->nmarks--; /* pops a mark */
      else rc = pop(vm, &v);
      break;
    case '1': /* POP_MARK */
      if (!(rc = pop_mark(vm, &n))) vm->sp = n;
      break;
    case '2': /* DUP */
      if (!(rc = top(vm, &v))) rc = push(vm, v);
      break;
    case 'N': rc = push(vm, pk_new(vm, PK_NONE)); break;
    case 0x88: case 0x89: /* NEWTRUE, NEWFALSE */
      if (!(v = pk_new(vm, PK_BOOL))) { rc = nomem(vm); break; }
      v->i = op == 0x88;
      rc = push(vm, v);
      break;
    case 'J': /* BININT: signed 4 bytes */
      if (!(rc = rd_uint(vm, 4, &u, "BININT"))) rc = push_int(vm, (int32_t)(uint32_t)u);
      break;
    case 'K': if (!(rc = rd_uint(vm, 1, &u, "BININT1"))) rc = push_int(vm, (int64_t)u); break;
    case 'M': if (!(rc = rd_uint(vm, 2, &u, "BININT2"))) rc = push_int(vm, (int64_t)u); break;
    case 0x8a: if (!(rc = rd_uint(vm, 1, &u, "LONG1"))) rc = push_long(vm, u); break;
    case 0x8b:
      if (!(rc = rd_uint(vm, 4, &u, "LONG4"))) rc = push_long(vm, u);
      break;
    case 'I': { /* INT: decimal text; "00"/"01" are False/True */
      if ((rc = rd_line(vm, &s, &n, "INT"))) break;
      char buf[32];
      if (n == 0 || n >= sizeof buf) { rc = pk_fail(vm, "INT: bad literal"); break; }
      memcpy(buf, s, n), buf[n] = 0;
      char *end;
      long long x = strtoll(buf, &end, 10);
      if (*end) { rc = pk_fail(vm, "INT: bad literal"); break; }
      if (n == 2 && (buf[1] == '0' || buf[1] == '1') && buf[0] == '0') {
        if (!(v = pk_new(vm, PK_BOOL))) { rc = nomem(vm); break; }
        v->i = buf[1] == '1';
        rc = push(vm, v);
      } else {
        rc = push_int(vm, x);
      }
      break;
    }
    case 'G': { /* BINFLOAT: big-endian double */
      if ((rc = need(vm, 8, "BINFLOAT"))) break;
      uint64_t b = 0;
      for (int i = 0; i < 8; i++) b = b << 8 | vm->p[vm->pos + (size_t)i];
      vm->pos += 8;
      if (!(v = pk_new(vm, PK_FLOAT))) { rc = nomem(vm); break; }
      memcpy(&v->f, &b, 8);
      rc = push(vm, v);
      break;
    }
    case 'X': if (!(rc = rd_uint(vm, 4, &u, "BINUNICODE"))) rc = push_str(vm, PK_STR, u, "a string"); break;
    case 0x8c: if (!(rc = rd_uint(vm, 1, &u, "SHORT_BINUNICODE"))) rc = push_str(vm, PK_STR, u, "a string"); break;
    case 0x8d: if (!(rc = rd_uint(vm, 8, &u, "BINUNICODE8"))) rc = push_str(vm, PK_STR, u, "a string"); break;
    /* Python 2 str (BINSTRING) and bytes: raw bytes (a tensor name in a Python 2 file
     * is ASCII: the caller decides what it accepts) */
    case 'T': if (!(rc = rd_uint(vm, 4, &u, "BINSTRING"))) rc = push_str(vm, PK_BYTES, u, "bytes"); break;
    case 'U': if (!(rc = rd_uint(vm, 1, &u, "SHORT_BINSTRING"))) rc = push_str(vm, PK_BYTES, u, "bytes"); break;
    case 'B': if (!(rc = rd_uint(vm, 4, &u, "BINBYTES"))) rc = push_str(vm, PK_BYTES, u, "bytes"); break;
    case 'C': if (!(rc = rd_uint(vm, 1, &u, "SHORT_BINBYTES"))) rc = push_str(vm, PK_BYTES, u, "bytes"); break;
    case 0x8e: if (!(rc = rd_uint(vm, 8, &u, "BINBYTES8"))) rc = push_str(vm, PK_BYTES, u, "bytes"); break;
    case 0x96: if (!(rc = rd_uint(vm, 8, &u, "BYTEARRAY8"))) rc = push_str(vm, PK_BYTES, u, "bytes"); break;
    case ')': rc = push(vm, pk_new(vm, PK_TUPLE)); break;
    case ']': rc = push(vm, pk_new(vm, PK_LIST)); break;
    case '}': rc = push(vm, pk_new(vm, PK_DICT)); break;
    case 0x8f: rc = push(vm, pk_new(vm, PK_LIST)); break; /* EMPTY_SET: a list here */
    case 't': if (!(rc = collect(vm, PK_TUPLE, &v))) rc = push(vm, v); break;
    case 'l': if (!(rc = collect(vm, PK_LIST, &v))) rc = push(vm, v); break;
    case 0x91: if (!(rc = collect(vm, PK_LIST, &v))) rc = push(vm, v); break; /* FROZENSET */
    case 0x85: case 0x86: case 0x87: { /* TUPLE1..3 */
      size_t k = (size_t)(op - 0x84);
      pk_val *items[3];
      for (size_t i = 0; i < k && !rc; i++) rc = pop(vm, &items[k - 1 - i]);
      if (rc) break;
      if (!(v = pk_new(vm, PK_TUPLE))) { rc = nomem(vm); break; }
      for (size_t i = 0; i < k && !rc; i++) rc = seq_append(vm, v, items[i]);
      if (!rc) rc = push(vm, v);
      break;
    }
    case 'a': /* APPEND */
      if ((rc = pop(vm, &w)) || (rc = top(vm, &v))) break;
      if (v->k != PK_LIST) { rc = pk_fail(vm, "APPEND to something that is not a list"); break; }
      rc = seq_append(vm, v, w);
      break;
    case 'e': case 0x90: { /* APPENDS, ADDITEMS */
      if ((rc = pop_mark(vm, &n))) break;
      if (n == 0 || n > vm->sp) { rc = pk_fail(vm, "APPENDS without a list below its mark"); break; }
      v = vm->stack[n - 1];
      if (v->k != PK_LIST) { rc = pk_fail(vm, "APPENDS to something that is not a list"); break; }
      for (size_t i = n; i < vm->sp && !rc; i++) rc = seq_append(vm, v, vm->stack[i]);
      vm->sp = n;
      break;
    }
    case 'd': /* DICT */
      if ((rc = collect(vm, PK_LIST, &w))) break;
      if (w->n % 2) { rc = pk_fail(vm, "DICT with an odd number of items"); break; }
      if (!(v = pk_new(vm, PK_DICT))) { rc = nomem(vm); break; }
      if (!(rc = set_items(vm, v, w->a, w->n))) rc = push(vm, v);
      break;
    case 's': { /* SETITEM */
      pk_val *kv[2];
      if ((rc = pop(vm, &kv[1])) || (rc = pop(vm, &kv[0])) || (rc = top(vm, &v))) break;
      rc = set_items(vm, v, kv, 2);
      break;
    }
    case 'u': /* SETITEMS */
      if ((rc = pop_mark(vm, &n))) break;
      if (n == 0 || n > vm->sp || (vm->sp - n) % 2) {
        rc = pk_fail(vm, "SETITEMS without a dict below its mark, or an odd item count");
        break;
      }
      rc = set_items(vm, vm->stack[n - 1], vm->stack + n, vm->sp - n);
      vm->sp = n;
      break;
    case 'q': if (!(rc = rd_uint(vm, 1, &u, "BINPUT"))) rc = memo_put(vm, u); break;
    case 'r': if (!(rc = rd_uint(vm, 4, &u, "LONG_BINPUT"))) rc = memo_put(vm, u); break;
    case 0x94: rc = memo_put(vm, vm->memo_n); break; /* MEMOIZE: at len(memo) */
    case 'h': if (!(rc = rd_uint(vm, 1, &u, "BINGET"))) rc = memo_get(vm, u); break;
    case 'j': if (!(rc = rd_uint(vm, 4, &u, "LONG_BINGET"))) rc = memo_get(vm, u); break;
    case 'p': case 'g': { /* PUT, GET: decimal text */
      if ((rc = rd_line(vm, &s, &n, op == 'p' ? "PUT" : "GET"))) break;
      u = 0;
      for (size_t i = 0; i < n && !rc; i++) {
        if (s[i] < '0' || s[i] > '9' || u > (1u << 26)) rc = pk_fail(vm, "bad memo index");
        else u = u * 10 + (uint64_t)(s[i] - '0');
      }
      if (!rc && n == 0) rc = pk_fail(vm, "bad memo index");
      if (!rc) rc = op == 'p' ? memo_put(vm, u) : memo_get(vm, u);
      break;
    }
    case 'c': { /* GLOBAL "module\nname\n" */
      const char *m2 = NULL;
      size_t n2 = 0;
      if ((rc = rd_line(vm, &s, &n, "GLOBAL")) || (rc = rd_line(vm, &m2, &n2, "GLOBAL"))) break;
      rc = do_global(vm, s, n, m2, n2);
      break;
    }
    case 0x93: /* STACK_GLOBAL */
      if ((rc = pop(vm, &w)) || (rc = pop(vm, &v))) break;
      if (v->k != PK_STR || w->k != PK_STR) { rc = pk_fail(vm, "STACK_GLOBAL of non-strings"); break; }
      rc = do_global(vm, v->s, v->n, w->s, w->n);
      break;
    case 'R': { /* REDUCE */
      pk_val *args, *r = NULL;
      if ((rc = pop(vm, &args)) || (rc = pop(vm, &v))) break;
      if (v->k != PK_GLOBAL || args->k != PK_TUPLE) {
        rc = pk_fail(vm, "REDUCE needs an allowed global and a tuple of arguments");
        break;
      }
      if (!(rc = vm->h.reduce(vm->h.ctx, vm, v->i, args, &r))) rc = push(vm, r);
      break;
    }
    case 'b': /* BUILD */
      if ((rc = pop(vm, &w)) || (rc = top(vm, &v))) break;
      rc = vm->h.build(vm->h.ctx, v, w);
      break;
    case 'Q': { /* BINPERSID */
      pk_val *r = NULL;
      if ((rc = pop(vm, &v))) break;
      if (!(rc = vm->h.persistent(vm->h.ctx, vm, v, &r))) rc = push(vm, r);
      break;
    }
    case 'P': { /* PERSID: a text id */
      pk_val *r = NULL;
      if ((rc = rd_line(vm, &s, &n, "PERSID"))) break;
      if (!(v = pk_new(vm, PK_STR))) { rc = nomem(vm); break; }
      v->s = s, v->n = n;
      if (!(rc = vm->h.persistent(vm->h.ctx, vm, v, &r))) rc = push(vm, r);
      break;
    }
    case 'i': rc = pk_fail(vm, "opcode INST (builds an object) is not allowed"); break;
    case 'o': rc = pk_fail(vm, "opcode OBJ (builds an object) is not allowed"); break;
    case 0x81: rc = pk_fail(vm, "opcode NEWOBJ (builds an object) is not allowed"); break;
    case 0x92: rc = pk_fail(vm, "opcode NEWOBJ_EX (builds an object) is not allowed"); break;
    case 0x82: case 0x83: case 0x84:
      rc = pk_fail(vm, "extension-registry opcodes (EXT1/2/4) are not allowed");
      break;
    case 0x97: case 0x98:
      rc = pk_fail(vm, "out-of-band buffers (NEXT_BUFFER, READONLY_BUFFER) are not allowed");
      break;
    default:
      rc = pk_fail(vm, "unknown or unsupported opcode 0x%02x", op);
      break;
    }
  }
  return rc;
}
