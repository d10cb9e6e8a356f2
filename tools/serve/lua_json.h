/* lua_json.h — JSON for the worker's Lua state (lua_json.c). */
#ifndef MXS_LUA_JSON_H
#define MXS_LUA_JSON_H

#include <jansson.h>
#include <lua.h>

/* Pushes the table {decode, encode, array, ordered, null}: what mx.serve.json is. */
int mxs_lua_open_json(lua_State *L);
/* Pushes v as a Lua value (the decoder's rules). */
int mxs_lua_push_json(lua_State *L, json_t *v);

#endif
