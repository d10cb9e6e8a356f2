-- spec/capi_spec.lua — the C API with no Lua: tools/capi/capi_demo.c runs FullyConnected,
-- Activation, broadcast_add and softmax by their MXNet names from MXNet string attributes
-- and checks the values itself; here we run it and check its exit status and output.
local lib = require("mx._lib")

-- The demo sits in CMake's build directory: the one holding the libmx this process
-- loaded (<build>/lib/mx/libmx.so), else MX_BUILD_DIR, else ./build.
local function demo_path()
  local cands = {}
  local dir = lib.libpath:match("^(.*)/lib/mx/[^/]+$") or lib.libpath:match("^(.*)/[^/]+$")
  if dir then cands[#cands + 1] = dir .. "/capi_demo" end
  if os.getenv("MX_BUILD_DIR") then cands[#cands + 1] = os.getenv("MX_BUILD_DIR") .. "/capi_demo" end
  cands[#cands + 1] = "build/capi_demo"
  for _, p in ipairs(cands) do
    local f = io.open(p, "rb")
    if f then
      f:close()
      return p
    end
  end
  return nil, table.concat(cands, ", ")
end

local function run(cmd)
  local p = assert(io.popen(cmd .. " 2>&1; echo \"rc=$?\""))
  local out = p:read("*a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return rc, out
end

describe("C API without Lua (capi_demo)", function()
  local path, tried = demo_path()

  it("is built next to libmx", function()
    assert(path, "capi_demo not found (tried " .. tostring(tried) .. "): build the default target")
  end)

  it("runs the MXNet-named ops and matches the hand-computed values", function()
    assert(path, "capi_demo not built")
    local rc, out = run("'" .. path .. "'")
    assert.equals(0, rc, out)
    for _, line in ipairs {
      "found FullyConnected %-> op %d+ %(fully_connected%)",
      "found Activation %-> op %d+ %(activation%)",
      "found broadcast_add %-> op %d+ %(add%)",
      "found softmax %-> op %d+ %(softmax%)",
      "ok FullyConnected", "ok Activation", "ok broadcast_add", "ok softmax",
      "PASSED %(0 failures%)",
    } do
      assert.truthy(out:find(line), "missing \"" .. line .. "\" in:\n" .. out)
    end
    assert.falsy(out:find("FAIL"), out)
  end)

  it("reports malformed and unknown attributes with the op, key and value", function()
    assert(path, "capi_demo not built")
    local _, out = run("'" .. path .. "'")
    for _, line in ipairs {
      'ok num_hidden="ten": error: fully_connected: attribute num_hidden="ten"',
      'ok unknown key num_hiden: error: fully_connected: unknown attribute num_hiden="2"',
    } do
      assert.truthy(out:find(line, 1, true), out)
    end
  end)
end)
