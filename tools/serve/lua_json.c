/* lua_json.c — JSON for the worker's Lua state (the handlers' mx.serve.json), on
 * jansson: decode (objects -> tables, arrays -> 1-based tables, null -> json.null) and
 * encode (a table is an array when it has [1] or the array marker, an object otherwise,
 * an object in a given key order when marked ordered: {{key, value}, ...};
 * numbers with 9 significant digits by default, enough for float32, or as asked).
 * Both bound their nesting; decode reports jansson's line and column. */
#include "lua_json.h"

#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* registry keys: the null sentinel and the array marker metatable */
static char NULL_KEY, ARRAY_KEY, ORDERED_KEY;

static int too_deep(json_t *v, int depth) {
  if (depth > 200) return 1;
  size_t i;
  const char *k;
  json_t *e;
  if (json_is_array(v)) json_array_foreach(v, i, e) if (too_deep(e, depth + 1)) return 1;
  if (json_is_object(v)) json_object_foreach(v, k, e) if (too_deep(e, depth + 1)) return 1;
  return 0;
}

/* v is at most 200 deep (too_deep checked): pushing cannot raise halfway */
static void push_json(lua_State *L, json_t *v, int depth) {
  lua_checkstack(L, 4);
  switch (json_typeof(v)) {
  case JSON_OBJECT: {
    lua_createtable(L, 0, (int)json_object_size(v));
    const char *k;
    json_t *e;
    json_object_foreach(v, k, e) {
      push_json(L, e, depth + 1);
      lua_setfield(L, -2, k);
    }
    break;
  }
  case JSON_ARRAY: {
    size_t n = json_array_size(v);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
      push_json(L, json_array_get(v, i), depth + 1);
      lua_rawseti(L, -2, (int)i + 1);
    }
    lua_pushlightuserdata(L, &ARRAY_KEY);
    lua_rawget(L, LUA_REGISTRYINDEX);
    lua_setmetatable(L, -2);
    break;
  }
  case JSON_STRING: lua_pushlstring(L, json_string_value(v), json_string_length(v)); break;
  case JSON_INTEGER: lua_pushnumber(L, (lua_Number)json_integer_value(v)); break;
  case JSON_REAL: lua_pushnumber(L, json_real_value(v)); break;
  case JSON_TRUE: lua_pushboolean(L, 1); break;
  case JSON_FALSE: lua_pushboolean(L, 0); break;
  default:
    lua_pushlightuserdata(L, &NULL_KEY);
    lua_rawget(L, LUA_REGISTRYINDEX);
  }
}

int mxs_lua_push_json(lua_State *L, json_t *v) {
  if (too_deep(v, 0)) return 0;
  push_json(L, v, 0);
  return 1;
}

static int l_decode(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  json_error_t je;
  json_t *v = json_loadb(s, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
  if (!v) {
    lua_pushnil(L);
    lua_pushfstring(L, "invalid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    return 2;
  }
  if (too_deep(v, 0)) {
    json_decref(v);
    lua_pushnil(L);
    lua_pushstring(L, "invalid JSON: nested deeper than 200 levels");
    return 2;
  }
  push_json(L, v, 0);
  json_decref(v);
  return 1;
}

/* The encoder writes into its own buffer (a luaL_Buffer would share the stack the walk
 * uses) and unwinds on failure instead of raising, so the buffer is always freed. */
typedef struct enc {
  char *p;
  size_t n, cap;
  int precision;
  char err[160];
} enc;

static int put(enc *e, const char *s, size_t n) {
  if (e->n + n > e->cap) {
    size_t cap = e->cap ? e->cap : 256;
    while (cap < e->n + n) cap *= 2;
    char *q = realloc(e->p, cap);
    if (!q) {
      snprintf(e->err, sizeof e->err, "json.encode: out of memory");
      return -1;
    }
    e->p = q;
    e->cap = cap;
  }
  memcpy(e->p + e->n, s, n);
  e->n += n;
  return 0;
}

static int puts_(enc *e, const char *s) { return put(e, s, strlen(s)); }

static int enc_string(lua_State *L, enc *e, int idx) {
  size_t n;
  const char *s = lua_tolstring(L, idx, &n);
  if (put(e, "\"", 1)) return -1;
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    if (put(e, s + run, i - run)) return -1;
    char u[8];
    switch (c) {
    case '"': snprintf(u, sizeof u, "\\\""); break;
    case '\\': snprintf(u, sizeof u, "\\\\"); break;
    case '\n': snprintf(u, sizeof u, "\\n"); break;
    case '\r': snprintf(u, sizeof u, "\\r"); break;
    case '\t': snprintf(u, sizeof u, "\\t"); break;
    default: snprintf(u, sizeof u, "\\u%04x", c);
    }
    if (puts_(e, u)) return -1;
    run = i + 1;
  }
  if (put(e, s + run, n - run)) return -1;
  return put(e, "\"", 1);
}

static int enc_value(lua_State *L, enc *e, int idx, int depth);

static int has_marker(lua_State *L, int idx, char *key) {
  if (!lua_getmetatable(L, idx)) return 0;
  lua_pushlightuserdata(L, key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  int marked = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return marked;
}

static int is_array(lua_State *L, int idx) {
  if (has_marker(L, idx, &ARRAY_KEY)) return 1;
  lua_rawgeti(L, idx, 1);
  int has = !lua_isnil(L, -1);
  lua_pop(L, 1);
  return has;
}

static int enc_table(lua_State *L, enc *e, int idx, int depth) {
  if (depth > 100) {
    snprintf(e->err, sizeof e->err, "json.encode: nested deeper than 100 levels (a cycle?)");
    return -1;
  }
  if (!lua_checkstack(L, 6)) {
    snprintf(e->err, sizeof e->err, "json.encode: out of stack");
    return -1;
  }
  if (has_marker(L, idx, &ORDERED_KEY)) {
    /* {{key, value}, ...}: an object whose keys keep this order */
    int n = (int)lua_objlen(L, idx);
    if (put(e, "{", 1)) return -1;
    for (int i = 1; i <= n; i++) {
      lua_rawgeti(L, idx, i);
      int pair = lua_gettop(L);
      lua_rawgeti(L, pair, 1);
      lua_rawgeti(L, pair, 2);
      int rc = lua_type(L, -2) == LUA_TSTRING ? 0 : -1;
      if (rc) snprintf(e->err, sizeof e->err, "json.encode: ordered entry %d has no string key", i);
      if (!rc && i > 1) rc = put(e, ",", 1);
      if (!rc) rc = enc_string(L, e, pair + 1);
      if (!rc) rc = put(e, ":", 1);
      if (!rc) rc = enc_value(L, e, pair + 2, depth + 1);
      lua_pop(L, 3);
      if (rc) return -1;
    }
    return put(e, "}", 1);
  }
  if (is_array(L, idx)) {
    int n = (int)lua_objlen(L, idx);
    if (put(e, "[", 1)) return -1;
    for (int i = 1; i <= n; i++) {
      if (i > 1 && put(e, ",", 1)) return -1;
      lua_rawgeti(L, idx, i);
      int rc = enc_value(L, e, lua_gettop(L), depth + 1);
      lua_pop(L, 1);
      if (rc) return -1;
    }
    return put(e, "]", 1);
  }
  if (put(e, "{", 1)) return -1;
  int first = 1;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    int kt = lua_type(L, -2);
    if (kt != LUA_TSTRING && kt != LUA_TNUMBER) {
      snprintf(e->err, sizeof e->err, "json.encode: a table key is a %s (object keys are strings)",
               lua_typename(L, kt));
      lua_pop(L, 2);
      return -1;
    }
    if (!first && put(e, ",", 1)) {
      lua_pop(L, 2);
      return -1;
    }
    first = 0;
    lua_pushvalue(L, -2);
    lua_tostring(L, -1); /* a copy: converting the key itself would confuse lua_next */
    int rc = enc_string(L, e, lua_gettop(L));
    lua_pop(L, 1);
    if (!rc) rc = put(e, ":", 1);
    if (!rc) rc = enc_value(L, e, lua_gettop(L), depth + 1);
    lua_pop(L, 1);
    if (rc) {
      lua_pop(L, 1);
      return -1;
    }
  }
  return put(e, "}", 1);
}

static int enc_value(lua_State *L, enc *e, int idx, int depth) {
  switch (lua_type(L, idx)) {
  case LUA_TNIL: return puts_(e, "null");
  case LUA_TBOOLEAN: return puts_(e, lua_toboolean(L, idx) ? "true" : "false");
  case LUA_TNUMBER: {
    double d = lua_tonumber(L, idx);
    char num[40];
    if (!isfinite(d)) snprintf(num, sizeof num, "null");
    else if (d == floor(d) && fabs(d) < 1e15) snprintf(num, sizeof num, "%.0f", d);
    else snprintf(num, sizeof num, "%.*g", e->precision, d);
    return puts_(e, num);
  }
  case LUA_TSTRING: return enc_string(L, e, idx);
  case LUA_TTABLE: return enc_table(L, e, idx, depth);
  case LUA_TLIGHTUSERDATA:
    if (lua_touserdata(L, idx) == &NULL_KEY) return puts_(e, "null");
    /* fall through */
  default:
    snprintf(e->err, sizeof e->err, "json.encode: cannot encode a %s", luaL_typename(L, idx));
    return -1;
  }
}

static int l_encode(lua_State *L) {
  luaL_checkany(L, 1);
  enc e = {NULL, 0, 0, 9, ""};
  e.precision = (int)luaL_optinteger(L, 2, 9);
  if (e.precision < 1 || e.precision > 17) luaL_argerror(L, 2, "precision is 1..17 digits");
  lua_settop(L, 1);
  if (enc_value(L, &e, 1, 0)) {
    free(e.p);
    lua_settop(L, 1);
    return luaL_error(L, "%s", e.err);
  }
  lua_pushlstring(L, e.p ? e.p : "", e.n);
  free(e.p);
  return 1;
}

static int mark(lua_State *L, char *key) {
  if (lua_isnoneornil(L, 1)) {
    lua_settop(L, 0);
    lua_newtable(L);
  }
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  lua_pushlightuserdata(L, key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  lua_setmetatable(L, 1);
  return 1;
}

static int l_array(lua_State *L) { return mark(L, &ARRAY_KEY); }
static int l_ordered(lua_State *L) { return mark(L, &ORDERED_KEY); }

int mxs_lua_open_json(lua_State *L) {
  lua_pushlightuserdata(L, &NULL_KEY);
  lua_pushlightuserdata(L, &NULL_KEY);
  lua_rawset(L, LUA_REGISTRYINDEX);
  lua_pushlightuserdata(L, &ARRAY_KEY);
  lua_newtable(L);
  lua_pushstring(L, "array");
  lua_setfield(L, -2, "__jsontype");
  lua_rawset(L, LUA_REGISTRYINDEX);
  lua_pushlightuserdata(L, &ORDERED_KEY);
  lua_newtable(L);
  lua_pushstring(L, "ordered");
  lua_setfield(L, -2, "__jsontype");
  lua_rawset(L, LUA_REGISTRYINDEX);
  static const luaL_Reg fns[] = {{"decode", l_decode}, {"encode", l_encode}, {"array", l_array},
                                 {"ordered", l_ordered}, {NULL, NULL}};
  lua_newtable(L);
  luaL_register(L, NULL, fns);
  lua_pushlightuserdata(L, &NULL_KEY);
  lua_setfield(L, -2, "null");
  return 1;
}
