/* two_states.c — a C host embedding LuaJIT that runs luamx in several Lua states on
 * several OS threads of one process (spec/session_spec.lua runs it and checks what it
 * prints; docs/embedding.md explains the rules it follows).
 *
 *   two_states <tools/hosts/mlp.lua>
 *
 * Phases, each printing lines the spec parses:
 *   1. single: the training script once, alone in one state;
 *   2. pair:   the same script in two states on two threads at the same time;
 *   3. quiet:  the script in one state while a second ("noise") state holds and churns
 *              hundreds of MB of tensors: the quiet state's GC count is its own;
 *   4. budget: two states run big ops at once while a third thread samples
 *              mx_threads_in_use; prints the budget, the sampled max and mx_threads_peak;
 *   5. handover: a tensor exported from one state and imported into another, then a
 *      second import of the same handle from a third state (a clear error);
 *   6. shared writes: two states add 1 in place to one handed-over tensor, N times each
 *      at the same time, with the inline path on; a third state reads the total.
 * Every state is created, used and closed on one thread: luamx binds a state's session
 * to the thread that loads mx. LUA_PATH / LUA_CPATH must find luamx (the spec sets them
 * like .busted). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *script_path;
static pthread_barrier_t start2;
static atomic_int flags[8]; /* named rendezvous flags, see flag_index */

static int flag_index(const char *name) {
  static const char *names[] = { "noise_ready", "quiet_done", "budget_done", NULL };
  for (int i = 0; names[i]; i++)
    if (!strcmp(names[i], name)) return i;
  return -1;
}

static int l_post(lua_State *L) {
  int i = flag_index(luaL_checkstring(L, 1));
  if (i < 0) return luaL_error(L, "host_post: unknown flag %s", lua_tostring(L, 1));
  atomic_store(&flags[i], 1);
  return 0;
}

static int l_wait(lua_State *L) {
  int i = flag_index(luaL_checkstring(L, 1));
  if (i < 0) return luaL_error(L, "host_wait: unknown flag %s", lua_tostring(L, 1));
  struct timespec ts = { 0, 1000000 };
  while (!atomic_load(&flags[i])) nanosleep(&ts, NULL);
  return 0;
}

static int l_is_set(lua_State *L) {
  int i = flag_index(luaL_checkstring(L, 1));
  if (i < 0) return luaL_error(L, "host_is_set: unknown flag %s", lua_tostring(L, 1));
  lua_pushboolean(L, atomic_load(&flags[i]));
  return 1;
}

static lua_State *new_state(const char *tag) {
  lua_State *L = luaL_newstate();
  if (!L) { fprintf(stderr, "two_states: out of memory\n"); exit(2); }
  luaL_openlibs(L);
  lua_register(L, "host_post", l_post);
  lua_register(L, "host_wait", l_wait);
  lua_register(L, "host_is_set", l_is_set);
  lua_pushstring(L, tag);
  lua_setglobal(L, "HOST_TAG");
  return L;
}

static void check(lua_State *L, int rc, const char *what) {
  if (rc) {
    fprintf(stderr, "two_states: %s: %s\n", what, lua_tostring(L, -1));
    exit(1);
  }
}

static void run_string(lua_State *L, const char *code, const char *what) {
  check(L, luaL_loadbuffer(L, code, strlen(code), what) || lua_pcall(L, 0, LUA_MULTRET, 0), what);
}

/* ---- phases 1-3: the training script ------------------------------------------------ */
typedef struct { const char *tag; const char *prelude; pthread_barrier_t *barrier; } train_job;

static void *train(void *p) {
  train_job *j = p;
  lua_State *L = new_state(j->tag);
  if (j->prelude) run_string(L, j->prelude, j->tag);
  if (j->barrier) pthread_barrier_wait(j->barrier);
  check(L, luaL_dofile(L, script_path), j->tag);
  lua_close(L);
  return NULL;
}

/* holds ~192 MB live, then churns 4 MB temporaries until the quiet state is done */
static const char *noise_code =
  "local mx = require('mx'); local nd = mx.nd; local H = require('mx.nd.handles')\n"
  "local keep = {}\n"
  "for i = 1, 48 do keep[i] = nd.zeros({ 1024, 1024 }) end\n"
  "mx.engine.waitall()\n"
  "local g0 = H.gc_count\n"
  "host_post('noise_ready')\n"
  "local n = 0\n"
  "repeat for _ = 1, 4 do local _ = nd.ones({ 1024, 1024 }) + 1 end; n = n + 1\n"
  "until host_is_set('quiet_done') and n >= 64\n"
  "io.write(string.format('noise held=%d bytes=%d gc=%d\\n', #keep,\n"
  "  require('mx.session').bytes_in_use(), H.gc_count - g0)); io.flush()\n";

static void *noise(void *p) {
  (void)p;
  lua_State *L = new_state("noise");
  run_string(L, noise_code, "noise");
  lua_close(L);
  return NULL;
}

/* ---- phase 4: the thread budget ----------------------------------------------------- */
static const char *budget_code =
  "local mx = require('mx'); local nd = mx.nd\n"
  "local a, b = nd.ones({ 1024, 1024 }), nd.ones({ 1024, 1024 })\n"
  "local x = nd.ones({ 4 * 1024 * 1024 })\n"
  "for _ = 1, 12 do\n"
  "  local c = nd.dot(a, b); local y = nd.exp(x) + x; mx.engine.waitall()\n"
  "  assert(c[{ 1, 1 }]:item() == 1024)\n"
  "end\n";

static void *budget_state(void *p) {
  lua_State *L = new_state((const char *)p);
  pthread_barrier_wait(&start2);
  run_string(L, budget_code, "budget");
  lua_close(L);
  return NULL;
}

static int (*p_in_use)(void), (*p_peak)(void), (*p_nthreads)(void);
static void (*p_reset_peak)(void);
static int sampled_max;

static void *sampler(void *p) {
  (void)p;
  struct timespec ts = { 0, 20000 };
  while (!atomic_load(&flags[2])) {
    int n = p_in_use();
    if (n > sampled_max) sampled_max = n;
    nanosleep(&ts, NULL);
  }
  return NULL;
}

/* ---- phase 5: hand-over --------------------------------------------------------------- */
static double hand_h, hand_ptr, hand_sum, hand_bytes;

static const char *export_code =
  "local mx = require('mx'); local S = mx.session\n"
  "mx.random.seed(3)\n"
  "local x = mx.random.uniform(0, 1, { 256, 256 })\n"
  "local sum = x:sum():item()\n"
  "local ptr = tonumber(require('ffi').cast('uintptr_t', x:data_ptr()))\n"
  "local h = S.export(x)\n"
  "x = nil; collectgarbage('collect'); collectgarbage('collect'); mx.nd._sweep()\n"
  "return h, ptr, sum, S.bytes_in_use()\n";

static const char *import_code =
  "local mx = require('mx'); local S = mx.session\n"
  "local before = S.bytes_in_use()\n"
  "local y = S.import(HAND_H)\n"
  "local ptr = tonumber(require('ffi').cast('uintptr_t', y:data_ptr()))\n"
  "io.write(string.format('handover same_ptr=%s same_sum=%s charged=%d exporter_left=%d\\n',\n"
  "  tostring(ptr == HAND_PTR), tostring(y:sum():item() == HAND_SUM),\n"
  "  S.bytes_in_use() - before, HAND_BYTES)); io.flush()\n";

static void *exporter(void *p) {
  (void)p;
  lua_State *L = new_state("exporter");
  run_string(L, export_code, "export");
  hand_h = lua_tonumber(L, -4), hand_ptr = lua_tonumber(L, -3);
  hand_sum = lua_tonumber(L, -2), hand_bytes = lua_tonumber(L, -1);
  lua_close(L); /* the exported tensor outlives its state (and keeps its session) */
  return NULL;
}

static void *importer(void *p) {
  (void)p;
  lua_State *L = new_state("importer");
  lua_pushnumber(L, hand_h), lua_setglobal(L, "HAND_H");
  lua_pushnumber(L, hand_ptr), lua_setglobal(L, "HAND_PTR");
  lua_pushnumber(L, hand_sum), lua_setglobal(L, "HAND_SUM");
  lua_pushnumber(L, hand_bytes), lua_setglobal(L, "HAND_BYTES");
  run_string(L, import_code, "import");
  lua_close(L);
  return NULL;
}

static const char *reimport_code =
  "local mx = require('mx'); local S = mx.session\n"
  "local ok, err = pcall(S.import, HAND_H)\n"
  "local ok2, err2 = pcall(S.import, HAND_H + 2)\n"
  "io.write(string.format('reimport ok=%s err=%s | bogus ok=%s err=%s\\n', tostring(ok),\n"
  "  tostring(err), tostring(ok2), tostring(err2))); io.flush()\n";

static void *reimporter(void *p) {
  (void)p;
  lua_State *L = new_state("reimporter");
  lua_pushnumber(L, hand_h), lua_setglobal(L, "HAND_H");
  run_string(L, reimport_code, "reimport");
  lua_close(L);
  return NULL;
}

/* ---- phase 6: two states writing one tensor in place ------------------------------------ */
#define SHARED_ADDS 200000 /* inline, unordered: ~200 of the 400000 were lost here */
static double shared_h;

static const char *shared_export_code =
  "local mx = require('mx')\n"
  "return mx.session.export(mx.nd.zeros({ 1 }), { imports = 3 })\n";

static const char *shared_add_code =
  "local mx = require('mx'); local nd = mx.nd\n"
  "local c = mx.session.import(SHARED_H)\n"
  "local one = nd.ones({ 1 })\n"
  "host_barrier()\n"
  "for _ = 1, SHARED_ADDS do nd.add(c, one, { out = c }) end\n"
  "mx.nd.waitall()\n";

static const char *shared_read_code =
  "local mx = require('mx')\n"
  "local c = mx.session.import(SHARED_H)\n"
  "io.write(string.format('shared total=%.0f expected=%d\\n', c:item(), 2 * SHARED_ADDS))\n"
  "io.flush()\n";

static int l_barrier(lua_State *L) {
  (void)L;
  pthread_barrier_wait(&start2);
  return 0;
}

static void *shared_state(void *p) {
  lua_State *L = new_state("shared");
  lua_register(L, "host_barrier", l_barrier);
  lua_pushnumber(L, shared_h), lua_setglobal(L, "SHARED_H");
  lua_pushinteger(L, SHARED_ADDS), lua_setglobal(L, "SHARED_ADDS");
  run_string(L, (const char *)p, "shared");
  lua_close(L);
  return NULL;
}

static void *shared_exporter(void *p) {
  (void)p;
  lua_State *L = new_state("shared_export");
  run_string(L, shared_export_code, "shared_export");
  shared_h = lua_tonumber(L, -1);
  lua_close(L);
  return NULL;
}

static void join2(void *(*f)(void *), void *a, void *(*g)(void *), void *b) {
  pthread_t t1, t2;
  pthread_create(&t1, NULL, f, a);
  pthread_create(&t2, NULL, g, b);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
}

static void *solo(void *(*f)(void *), void *a) {
  pthread_t t;
  pthread_create(&t, NULL, f, a);
  pthread_join(t, NULL);
  return NULL;
}

/* libmx as mx.core.lib loaded it (the same object: RTLD_NOLOAD), for the budget counters */
static void *libmx;
static void *find_lib(void *p) {
  (void)p;
  lua_State *L = new_state("lib");
  run_string(L, "return require('mx.core.lib').libpath", "libpath");
  libmx = dlopen(lua_tostring(L, -1), RTLD_NOW | RTLD_NOLOAD);
  if (!libmx) { fprintf(stderr, "two_states: dlopen: %s\n", dlerror()); exit(1); }
  lua_close(L);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: two_states <mlp.lua>\n"); return 2; }
  script_path = argv[1];
  /* keep libmx loaded across states (each state's close would otherwise be the last) */
  solo(find_lib, NULL);
  p_in_use = (int (*)(void))dlsym(libmx, "mx_threads_in_use");
  p_peak = (int (*)(void))dlsym(libmx, "mx_threads_peak");
  p_reset_peak = (void (*)(void))dlsym(libmx, "mx_threads_reset_peak");
  p_nthreads = (int (*)(void))dlsym(libmx, "mx_get_num_threads");
  if (!p_in_use || !p_peak || !p_reset_peak || !p_nthreads) {
    fprintf(stderr, "two_states: libmx lacks the thread budget counters\n");
    return 1;
  }

  train_job single = { "single", NULL, NULL };
  solo(train, &single);

  pthread_barrier_init(&start2, NULL, 2);
  train_job a = { "pair_a", NULL, &start2 }, b = { "pair_b", NULL, &start2 };
  join2(train, &a, train, &b);

  train_job quiet = { "quiet",
    "HOST_BEFORE = function() host_wait('noise_ready') end\n"
    "HOST_AFTER = function() host_post('quiet_done') end\n", NULL };
  join2(noise, NULL, train, &quiet);

  p_reset_peak();
  pthread_t ts;
  pthread_create(&ts, NULL, sampler, NULL);
  join2(budget_state, "budget_a", budget_state, "budget_b");
  atomic_store(&flags[2], 1);
  pthread_join(ts, NULL);
  printf("threads budget=%d peak=%d sampled_max=%d\n", p_nthreads(), p_peak(), sampled_max);

  solo(exporter, NULL);
  solo(importer, NULL);
  solo(reimporter, NULL);

  solo(shared_exporter, NULL);
  join2(shared_state, (void *)shared_add_code, shared_state, (void *)shared_add_code);
  solo(shared_state, (void *)shared_read_code);
  pthread_barrier_destroy(&start2);
  printf("done\n");
  return 0;
}
