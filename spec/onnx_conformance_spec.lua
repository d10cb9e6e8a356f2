-- ONNX import measured on ONNX's own backend test data as Debian ships it
-- (libonnx-testdata: data/node, pytorch-converted, pytorch-operator, simple; each case a
-- model.onnx with input/output .pb files): every case is run (spec/helpers/onnx_case.lua)
-- and printed as pass / fail / unsupported with the totals; each case listed in
-- spec/fixtures/onnx_conformance_pass.lua (tools/onnx/conformance.lua --write) must pass.
-- docs/onnx.md has the table and the comparison with ONNX Runtime.
local case = require("helpers.onnx_case")

local ROOT = "/usr/share/libonnx-testdata/data/"
local FOLDERS = { "node", "pytorch-converted", "pytorch-operator", "simple" }

local function have_data()
  local f = io.open(ROOT .. "node/test_abs/model.onnx", "rb")
  if f then f:close() end
  return f ~= nil
end

describe("ONNX backend test data", function()
  it("runs every case and keeps every listed case passing", function()
    if not have_data() then pending("libonnx-testdata is not installed (tools/setup.sh)") return end
    local must = {}
    for _, c in ipairs(dofile("spec/fixtures/onnx_conformance_pass.lua")) do must[c] = true end
    local regressions = {}
    for _, f in ipairs(FOLDERS) do
      local tot = { pass = 0, fail = 0, unsupported = 0, frozen = 0 }
      local p = assert(io.popen("ls " .. ROOT .. f))
      for name in p:lines() do
        local key = f .. "/" .. name
        local r = case(ROOT .. key)
        tot[r.status] = tot[r.status] + 1
        if r.frozen then tot.frozen = tot.frozen + 1 end
        io.write(string.format("# onnx %s%s %s %s\n", r.status, r.frozen and "*" or "", key,
          (r.why or ""):gsub("\n", " "):sub(1, 200)))
        if must[key] and r.status ~= "pass" then
          regressions[#regressions + 1] = key .. ": " .. tostring(r.why)
        end
      end
      p:close()
      io.write(string.format("# onnx TOTAL %s: pass %d (%d with constant inputs), fail %d, unsupported %d\n",
        f, tot.pass, tot.frozen, tot.fail, tot.unsupported))
    end
    assert.same({}, regressions)
  end)
end)
