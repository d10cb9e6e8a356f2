/* pickle.h — a restricted unpickler: Python's pickle VM for the data a file may describe
 * (None, bools, ints, floats, strings, bytes, tuples, lists, dicts) and nothing that
 * runs code. A GLOBAL is a name, resolved by the caller against its allowlist (anything
 * else is an error naming the global); REDUCE calls only what that resolver accepts; a
 * persistent id goes to the caller's hook. INST, OBJ, NEWOBJ, NEWOBJ_EX and EXT* are
 * refused. Every length is checked against the bytes left, ints wider than 64 bits are
 * kept as raw bytes, and the value count is bounded by the input's size. Used by
 * torchfile.c (PyTorch checkpoints). */
#ifndef MX_PICKLE_H
#define MX_PICKLE_H

#include "internal.h"

typedef enum {
  PK_NONE, PK_BOOL, PK_INT, PK_BIGINT, PK_FLOAT, PK_STR, PK_BYTES, PK_TUPLE, PK_LIST, PK_DICT,
  PK_GLOBAL, PK_OBJ, PK_MARK
} pk_kind;

typedef struct pk_val pk_val;
struct pk_val {
  pk_kind k;
  int64_t i;            /* PK_INT, PK_BOOL; PK_GLOBAL: the resolver's id */
  double f;             /* PK_FLOAT */
  const char *s;        /* PK_STR, PK_BYTES, PK_BIGINT (little-endian two's complement) */
  size_t n;             /* their length */
  pk_val **a;           /* PK_TUPLE, PK_LIST: n items; PK_DICT: n key, value pairs (2n) */
  size_t cap;
  void *obj;            /* PK_OBJ: what the caller's hooks made (an id in i) */
  pk_val *next_alloc;
};

typedef struct pk_vm pk_vm;
/* The caller's side. Each returns MX_OK or an error already set with mx_err. */
typedef struct pk_hooks {
  void *ctx;
  /* "module name" of a GLOBAL/STACK_GLOBAL -> *id >= 0, or an error naming it */
  int (*global)(void *ctx, const char *module, const char *name, int64_t *id);
  /* REDUCE of global id on args (a tuple) -> *out (made with pk_new) */
  int (*reduce)(void *ctx, pk_vm *vm, int64_t id, pk_val *args, pk_val **out);
  /* BUILD: obj.__setstate__(state); may ignore the state */
  int (*build)(void *ctx, pk_val *obj, pk_val *state);
  /* BINPERSID / PERSID -> *out */
  int (*persistent)(void *ctx, pk_vm *vm, pk_val *pid, pk_val **out);
} pk_hooks;

/* A VM over p[0..len): values live until pk_vm_free. who/file name the messages. */
pk_vm *pk_vm_new(const uint8_t *p, size_t len, const char *who, const char *file,
                 const pk_hooks *hooks);
void pk_vm_free(pk_vm *vm);
/* Runs one pickle from the current position up to its STOP: *out is its value. */
int pk_load(pk_vm *vm, pk_val **out);
size_t pk_pos(const pk_vm *vm);
void pk_seek(pk_vm *vm, size_t pos);
pk_val *pk_new(pk_vm *vm, pk_kind k);
/* pickle's error message format: "<who>: <file>: pickle at byte N: ..." */
int pk_fail(const pk_vm *vm, const char *fmt, ...) MX_PRINTF(2, 3);
/* Whether v is a str equal to s. */
bool pk_is_str(const pk_val *v, const char *s);

#endif
