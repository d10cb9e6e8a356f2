-- luamx: MXNet rebuilt for LuaJIT. Install from a checkout:
--   luarocks --lua-version=5.1 make rockspec/luamx-scm-1.rockspec --tree DIR
-- libmx is an FFI library (it links no Lua), so one build serves every 5.1-ABI VM;
-- run it with LuaJIT (the `ffi` module is required). See docs/install.md.
rockspec_format = "3.0"
package = "luamx"
version = "scm-1"
source = {
  url = "git+https://example.invalid/luamx.git", -- ignored by `luarocks make`
}
description = {
  summary = "Apache MXNet rebuilt for LuaJIT: a C11 core, LuaJIT FFI and Gluon in Lua",
  detailed = [[
luamx is a deep-learning framework in the spirit of Apache MXNet: NDArrays on a C11
core (dependency engine, OpenBLAS/oneDNN kernels, optional CUDA), autograd, symbols
and hybridize, and Gluon (blocks, trainers, data loaders) written in Lua, driven
through LuaJIT's FFI. `local mx = require("mx")`.
]],
  homepage = "https://example.invalid/luamx",
  license = "Apache-2.0",
}
dependencies = {
  "lua ~> 5.1", -- LuaJIT (5.1 ABI); the FFI is required at run time
}
build_dependencies = {}
external_dependencies = {
  -- the build also needs cmake, gcc, OpenBLAS (cblas.h), zlib and optionally
  -- oneDNN and the CUDA toolkit: found by CMake, not by LuaRocks
}
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    LUADIR = "$(LUADIR)",
    LIBDIR = "$(LIBDIR)",
    BINDIR = "$(BINDIR)",
  },
  -- CMake's install() rules put libmx under LIBDIR/mx/, the Lua modules (with
  -- gluon/ as mx/gluon/, the op table in mx/core/ops/, and mx.h as mx/core/mx.h)
  -- under LUADIR/mx/
}
test = {
  type = "command",
  command = "busted --lua=luajit",
}
