/* fuzz_serve.c — libFuzzer target for mx-serve's request parsers (tools/serve):
 *   * the KServe v2 infer request (v2.c, mxs_v2_parse): a JSON body's tensors checked
 *     against a model's signature and packed into the job's meta and blob;
 *   * the workers' JSON (lua_json.c: mx.serve.json, what a handler reads a request body
 *     with): decode into a Lua state, encode what it gave, decode that again.
 * Byte 0 of an input picks the parser and the signature (even: v2 against SIGS[(b0 / 2) %
 * NSIG]; odd: JSON); the rest is the request body. The HTTP framing, headers and
 * multipart bodies are libmicrohttpd's (spec/serve_hostile_spec.lua sends malformed ones
 * to a running server).
 *
 * The harness aborts (a finding) when a parser answers outside its contract: a status
 * other than 0 / 400 / 413 / 503 or one without a message; an accepted request whose meta
 * is not JSON, whose tensors' offsets, lengths and alignment do not match their shapes
 * and datatypes, or lie outside the blob; a decode whose value the encoder cannot write
 * except for its documented limits, or whose encoding does not decode to a value encoded
 * the same again.
 *
 *   build-fuzz/fuzz_serve -max_len=4096 -dict=tools/fuzz/fuzz_serve.dict CORPUS \
 *     spec/fixtures/fuzz_serve */
#include "serve.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* the signatures a model's handler may declare (-1: any size) */
static const char *const SIGS[] = {
    "{\"inputs\": [{\"name\": \"data\", \"dtype\": \"float32\", \"shape\": [-1, 3]}],"
    " \"outputs\": [{\"name\": \"prob\"}]}",
    "{\"inputs\": [{\"name\": \"ids\", \"dtype\": \"int64\", \"shape\": [-1, -1]},"
    " {\"name\": \"mask\", \"dtype\": \"bool\", \"shape\": [-1, -1]},"
    " {\"name\": \"pix\", \"dtype\": \"uint8\", \"shape\": [2, 2, 3]}],"
    " \"outputs\": [{\"name\": \"a\"}, {\"name\": \"b\"}]}",
    "{\"inputs\": [{\"name\": \"h\", \"dtype\": \"float16\", \"shape\": [-1]},"
    " {\"name\": \"b\", \"dtype\": \"bfloat16\", \"shape\": [4]},"
    " {\"name\": \"d\", \"dtype\": \"float64\", \"shape\": [-1, 2]},"
    " {\"name\": \"i8\", \"dtype\": \"int8\", \"shape\": [-1]},"
    " {\"name\": \"i32\", \"dtype\": \"int32\", \"shape\": [-1]}], \"outputs\": []}",
    "{\"inputs\": [{\"name\": \"x\", \"shape\": [-1, -1, -1, -1, -1, -1, -1, -1]}]}",
};
#define NSIG (sizeof SIGS / sizeof SIGS[0])

static struct mxs_server srv;
static mxs_version ver[NSIG];
static lua_State *L;

static void fail(const char *what, const uint8_t *data, size_t size) {
  fprintf(stderr, "fuzz_serve: %s (input of %zu bytes: %.200s)\n", what, size,
          size > 1 ? (const char *)data + 1 : "");
  abort();
}

static void init(void) {
  srv.cfg.max_request_size = 1 << 20;
  for (size_t k = 0; k < NSIG; k++) {
    json_error_t je;
    ver[k].srv = &srv;
    ver[k].name = (char *)"fuzzmodel";
    ver[k].signature = json_loads(SIGS[k], 0, &je);
    if (!ver[k].signature) {
      fprintf(stderr, "fuzz_serve: signature %zu: %s\n", k, je.text);
      abort();
    }
    pthread_mutex_init(&ver[k].sig_mu, NULL);
  }
  L = luaL_newstate();
  if (!L) abort();
  luaL_openlibs(L);
  mxs_lua_open_json(L);
  lua_setglobal(L, "json");
}

static int dtype_size(const char *dt) {
  static const struct { const char *n; int s; } T[] = {
      {"bool", 1}, {"uint8", 1}, {"int8", 1}, {"int32", 4}, {"int64", 8},
      {"float16", 2}, {"bfloat16", 2}, {"float32", 4}, {"float64", 8}};
  for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
    if (dt && !strcmp(T[i].n, dt)) return T[i].s;
  return 0;
}

static void check_v2(mxs_version *v, const uint8_t *data, size_t size) {
  mxs_job j;
  memset(&j, 0, sizeof j);
  char msg[512] = "";
  int st = mxs_v2_parse(v, (const char *)data + 1, size - 1, &j, msg, sizeof msg);
  if (st != 0) {
    if (st != 400 && st != 413 && st != 503) fail("mxs_v2_parse: a status outside 400/413/503", data, size);
    if (!msg[0]) fail("mxs_v2_parse: a refusal without a message", data, size);
    if (j.meta || j.blob) fail("mxs_v2_parse: a refusal that left a job", data, size);
    return;
  }
  json_error_t je;
  json_t *meta = j.meta ? json_loadb(j.meta, j.meta_len, 0, &je) : NULL;
  if (!meta) fail("mxs_v2_parse: the meta of an accepted request is not JSON", data, size);
  json_t *ins = json_object_get(meta, "inputs");
  if (!json_is_array(ins) || json_array_size(ins) == 0)
    fail("mxs_v2_parse: an accepted request without inputs", data, size);
  size_t i, end = 0;
  json_t *in;
  json_array_foreach(ins, i, in) {
    json_int_t off = json_integer_value(json_object_get(in, "off"));
    json_int_t len = json_integer_value(json_object_get(in, "len"));
    int es = dtype_size(json_string_value(json_object_get(in, "dtype")));
    json_t *shape = json_object_get(in, "shape");
    json_int_t count = 1;
    size_t k;
    json_t *d;
    json_array_foreach(shape, k, d) count *= json_integer_value(d);
    if (!es || !json_is_array(shape) || off < 0 || off % 8 || (size_t)off < end ||
        len != count * es || (size_t)(off + len) > j.blob_len)
      fail("mxs_v2_parse: an accepted tensor that does not fit its shape, dtype or blob", data, size);
    end = (size_t)(off + len);
  }
  json_decref(meta);
  free(j.meta);
  free(j.blob);
}

/* json.decode(s); when it gives a value: json.encode(v) (clean errors only: the nesting
 * bound of 100) and json.decode of that */
static const char *ROUNDTRIP =
    "local s = ...\n"
    "local v, err = json.decode(s)\n"
    "if v == nil then\n"
    "  if type(err) ~= 'string' or not err:find('^invalid JSON') then return 'decode: ' .. tostring(err) end\n"
    "  return nil\n"
    "end\n"
    "local ok, e = pcall(json.encode, v)\n"
    "if not ok then\n"
    "  if tostring(e):find('nested deeper than 100 levels', 1, true) then return nil end\n"
    "  return 'encode: ' .. tostring(e)\n"
    "end\n"
    "local w, err2 = json.decode(e)\n"
    "if w == nil then return 'the encoding does not decode: ' .. tostring(err2) end\n"
    "local ok2, e2 = pcall(json.encode, w)\n"
    "if not ok2 then return 'encode of a decoded encoding: ' .. tostring(e2) end\n"
    "-- (the first round may normalise: -0 is written \"-0\", read back as the integer 0)\n"
    "local e3 = json.encode(json.decode(e2))\n"
    "if #e3 ~= #e2 then return 'encoding is not stable after one round: ' .. e2 .. ' then ' .. e3 end\n"
    "return nil\n";

static void check_json(const uint8_t *data, size_t size) {
  static int ref = LUA_NOREF;
  if (ref == LUA_NOREF) {
    if (luaL_loadstring(L, ROUNDTRIP)) abort();
    ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
  lua_pushlstring(L, (const char *)data + 1, size - 1);
  if (lua_pcall(L, 1, 1, 0)) fail(lua_tostring(L, -1), data, size);
  if (!lua_isnil(L, -1)) fail(lua_tostring(L, -1), data, size);
  lua_settop(L, 0);
  lua_gc(L, LUA_GCSTEP, 64);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!L) init();
  if (size < 1) return 0;
  if (data[0] & 1) check_json(data, size);
  else check_v2(&ver[(data[0] / 2) % NSIG], data, size);
  return 0;
}
