/* worker.c — mx-serve-worker: one worker process of a model version. It runs the
 * version's handler in its own LuaJIT state (require("mx.serve._worker"): the handler's
 * initialize, then preprocess/inference/postprocess per batch), over libmx's inference
 * runtime, which the Lua side loads through the FFI as any luamx script does (this
 * program links LuaJIT and jansson, never libmx). It talks to the front end over fd 3
 * (proto.h): READY once initialised (or FAIL with the message), then a RESULT or an
 * ERROR per BATCH, until STOP or the front end goes away (it dies with its parent).
 *
 *   mx-serve-worker --fd 3 --config '{"dir": ..., "handler": ..., ...}' */
#include "lua_json.h"
#include "proto.h"

#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static int fd = -1;

static void fail(const char *msg) {
  fprintf(stderr, "mx-serve-worker[%d]: %s\n", (int)getpid(), msg);
  if (fd >= 0) mxs_frame_write(fd, MXS_MSG_FAIL, msg, strlen(msg));
  exit(1);
}

static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg) msg = "(an error that is not a string)";
  luaL_traceback(L, L, msg, 1);
  return 1;
}

static int open_json(lua_State *L) { return mxs_lua_open_json(L); }

/* the handler's archive directory first on package.path: its own modules */
static void setup_paths(lua_State *L, const char *dir) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  lua_pushfstring(L, "%s/?.lua;%s", dir, lua_tostring(L, -1));
  lua_setfield(L, -3, "path");
  lua_pop(L, 1);
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, open_json);
  lua_setfield(L, -2, "mx.serve._json");
  lua_pop(L, 2);
}

/* the batch's requests as {meta = table, blob = string}; 0 or -1 */
static int push_batch(lua_State *L, mxs_cur *c, uint32_t n) {
  lua_createtable(L, (int)n, 0);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t ml = mxs_cur_u32(c);
    uint64_t bl = mxs_cur_u64(c);
    const char *meta = mxs_cur_bytes(c, ml), *blob = mxs_cur_bytes(c, bl);
    if (c->bad) return -1;
    json_error_t je;
    json_t *m = json_loadb(meta, ml, 0, &je);
    if (!m) return -1;
    lua_createtable(L, 0, 2);
    int ok = mxs_lua_push_json(L, m);
    json_decref(m);
    if (!ok) return -1;
    lua_setfield(L, -2, "meta");
    lua_pushlstring(L, blob, (size_t)bl);
    lua_setfield(L, -2, "blob");
    lua_rawseti(L, -2, (int)i + 1);
  }
  return 0;
}

static int send_error(uint64_t id, const char *msg) {
  size_t n = strlen(msg);
  char *p = malloc(8 + n);
  if (!p) return -1;
  memcpy(p, &id, 8);
  memcpy(p + 8, msg, n);
  int rc = mxs_frame_write(fd, MXS_MSG_ERROR, p, 8 + n);
  free(p);
  return rc;
}

/* the responses table below the raised flag at the top: n x {status, content_type, body} */
static int send_result(lua_State *L, uint64_t id, uint32_t n) {
  uint32_t flags = lua_toboolean(L, -1) ? 1 : 0;
  int t = lua_gettop(L) - 1;
  if (!lua_istable(L, t) || lua_objlen(L, t) != n) return send_error(id, "mx.serve: the worker glue returned no list of answers");
  uint64_t total = 16;
  for (uint32_t i = 1; i <= n; i++) {
    lua_rawgeti(L, t, (int)i);
    lua_getfield(L, -1, "content_type");
    lua_getfield(L, -2, "body");
    size_t cl = 0, bl = 0;
    lua_tolstring(L, -2, &cl);
    lua_tolstring(L, -1, &bl);
    total += 16 + cl + bl;
    lua_pop(L, 3);
  }
  char *p = malloc((size_t)total), *w = p;
  if (!p) return send_error(id, "mx.serve: out of memory for the answers");
  memcpy(w, &id, 8);
  memcpy(w + 8, &n, 4);
  memcpy(w + 12, &flags, 4);
  w += 16;
  for (uint32_t i = 1; i <= n; i++) {
    lua_rawgeti(L, t, (int)i);
    lua_getfield(L, -1, "status");
    lua_getfield(L, -2, "content_type");
    lua_getfield(L, -3, "body");
    uint32_t status = (uint32_t)lua_tointeger(L, -3);
    if (status < 100 || status > 599) status = 500;
    size_t cl = 0, bl = 0;
    const char *ct = lua_tolstring(L, -2, &cl), *body = lua_tolstring(L, -1, &bl);
    uint32_t cl32 = (uint32_t)cl;
    uint64_t bl64 = bl;
    memcpy(w, &status, 4);
    memcpy(w + 4, &cl32, 4);
    memcpy(w + 8, &bl64, 8);
    w += 16;
    if (cl) memcpy(w, ct, cl);
    w += cl;
    if (bl) memcpy(w, body, bl);
    w += bl;
    lua_pop(L, 4);
  }
  int rc = mxs_frame_write(fd, MXS_MSG_RESULT, p, (size_t)total);
  free(p);
  return rc;
}

int main(int argc, char **argv) {
  const char *config = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--fd")) fd = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--config")) config = argv[i + 1];
  }
  if (fd < 0 || !config) {
    fprintf(stderr, "usage: mx-serve-worker --fd N --config JSON (started by mx-serve)\n");
    return 2;
  }
  /* the worker never outlives the front end */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) return 1;
  signal(SIGPIPE, SIG_IGN);
  json_error_t je;
  json_t *cfg = json_loads(config, 0, &je);
  if (!json_is_object(cfg)) fail("mx-serve-worker: malformed --config");
  const char *dir = json_string_value(json_object_get(cfg, "dir"));
  if (!dir) fail("mx-serve-worker: --config has no dir");
  if (chdir(dir)) fail("mx-serve-worker: cannot enter the model directory");
  lua_State *L = luaL_newstate();
  if (!L) fail("mx-serve-worker: cannot create a Lua state");
  luaL_openlibs(L);
  setup_paths(L, dir);
  lua_pushcfunction(L, traceback);
  int tb = lua_gettop(L);
  lua_getglobal(L, "require");
  lua_pushstring(L, "mx.serve._worker");
  if (lua_pcall(L, 1, 1, tb)) fail(lua_tostring(L, -1));
  int glue = lua_gettop(L);
  lua_getfield(L, glue, "init");
  if (!mxs_lua_push_json(L, cfg)) fail("mx-serve-worker: --config nested too deep");
  json_decref(cfg);
  if (lua_pcall(L, 1, 1, tb)) fail(lua_tostring(L, -1));
  /* init returns the READY payload (JSON text) */
  size_t rl;
  const char *ready = lua_tolstring(L, -1, &rl);
  if (!ready) fail("mx.serve._worker.init returned no signature");
  if (mxs_frame_write(fd, MXS_MSG_READY, ready, rl)) return 1;
  lua_pop(L, 1);
  lua_getfield(L, glue, "batch");
  int batch_fn = luaL_ref(L, LUA_REGISTRYINDEX);
  for (;;) {
    mxs_frame h;
    char *p = NULL;
    int r = mxs_frame_read(fd, &h, &p, MXS_FRAME_MAX, 0);
    if (r) break; /* the front end went away */
    if (h.type == MXS_MSG_STOP) {
      free(p);
      break;
    }
    if (h.type != MXS_MSG_BATCH) {
      free(p);
      fprintf(stderr, "mx-serve-worker[%d]: unexpected message %u\n", (int)getpid(), h.type);
      return 3;
    }
    mxs_cur c = {p, (size_t)h.len, 0};
    uint64_t id = mxs_cur_u64(&c);
    uint32_t n = mxs_cur_u32(&c);
    int base = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, batch_fn);
    if (c.bad || n == 0 || n > 65536 || push_batch(L, &c, n)) {
      free(p);
      fprintf(stderr, "mx-serve-worker[%d]: malformed batch\n", (int)getpid());
      return 3;
    }
    free(p);
    int rc;
    if (lua_pcall(L, 1, 2, tb)) {
      const char *msg = lua_tostring(L, -1);
      fprintf(stderr, "mx-serve-worker[%d]: %s\n", (int)getpid(), msg ? msg : "error");
      rc = send_error(id, msg ? msg : "error");
    } else {
      rc = send_result(L, id, n);
    }
    lua_settop(L, base);
    if (rc) break;
  }
  lua_close(L);
  return 0;
}
