-- spec/build_spec.lua #slow — the install story: `luarocks make` of the
-- rockspec into a fresh tree installs everything, after which `require("mx")` works
-- through `luarocks path` alone (no LD_LIBRARY_PATH, no checkout paths).
local sh = require("helpers.sh")

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

describe("install #slow", function()
  local tmp

  setup(function()
    local rc
    rc, tmp = sh("mktemp -d /tmp/luamx-install.XXXXXX")
    assert(rc == 0, tmp)
    tmp = tmp:match("^(%S+)")
  end)

  teardown(function()
    if tmp and tmp:match("^/tmp/luamx%-install") then sh("rm -rf " .. tmp) end
  end)

  it("luarocks make installs libmx, the Lua modules, gluon, the op table and mx.h", function()
    -- a copy of the working tree (tracked + untracked, not ignored files)
    local rc, out = sh("git ls-files -co --exclude-standard -z | tar --null -cf - -T - | "
      .. "tar -xf - -C " .. tmp)
    assert(rc == 0, out)
    rc, out = sh("cd " .. tmp .. " && MX_USE_CUDA=OFF CMAKE_BUILD_PARALLEL_LEVEL=2 "
      .. "luarocks --lua-version=5.1 make "
      .. "rockspec/luamx-scm-1.rockspec --tree " .. tmp .. "/tree")
    assert(rc == 0, out)
    local luadir, libdir = tmp .. "/tree/share/lua/5.1/mx", tmp .. "/tree/lib/lua/5.1/mx"
    for _, f in ipairs { libdir .. "/libmx.so", luadir .. "/init.lua", luadir .. "/nd.lua",
      luadir .. "/core/lib.lua", luadir .. "/core/ops/optable.lua", luadir .. "/core/ops/shape.lua",
      luadir .. "/core/mx.h", luadir .. "/core/mx_mpi.h", luadir .. "/core/mx_nccl.h",
      luadir .. "/nd/handles.lua", luadir .. "/graph/cached_op.lua",
      luadir .. "/gluon/data/worker.lua" } do
      assert(exists(f), "missing after install: " .. f)
    end
    if exists("gluon/init.lua") then
      assert(exists(luadir .. "/gluon/init.lua"), "gluon not installed as mx/gluon")
    end
    -- require through luarocks path only, from another directory
    rc, out = sh("cd / && env -u LUA_PATH -u LUA_CPATH -u LD_LIBRARY_PATH sh -c 'eval \"$(luarocks "
      .. "--lua-version=5.1 path --tree " .. tmp .. "/tree)\"; luajit -e \"local mx = require(\\\"mx\\\"); "
      .. "assert(require(\\\"mx.core.lib\\\").libpath:find(\\\"" .. tmp .. "/tree\\\", 1, true)); "
      .. "print((mx.nd.ones{2} + 1):tolist()[1])\"'")
    assert(rc == 0, out)
    assert.matches("2", out)
  end)
end)
