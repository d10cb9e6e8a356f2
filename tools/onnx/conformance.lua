-- tools/onnx/conformance.lua — luamx over ONNX's backend test data (Debian's
-- libonnx-testdata), the same runner as spec/onnx_conformance_spec.lua:
--   bin/mx tools/onnx/conformance.lua [--write] [folder ...]
-- prints "pass|fail|unsupported <folder>/<case> <why>" per case ("pass*": passed with every
-- input taken as a constant, see docs/onnx.md) and the totals per folder. --write also
-- writes spec/fixtures/onnx_conformance_pass.lua, the cases the spec requires to pass.
package.path = "spec/?.lua;" .. package.path
local case = require("helpers.onnx_case")

local ROOT = "/usr/share/libonnx-testdata/data/"
local write, folders = false, {}
for _, a in ipairs(arg) do
  if a == "--write" then write = true else folders[#folders + 1] = a end
end
if #folders == 0 then folders = { "node", "pytorch-converted", "pytorch-operator", "simple" } end

local passing = {}
for _, f in ipairs(folders) do
  local tot = { pass = 0, fail = 0, unsupported = 0, frozen = 0 }
  local p = assert(io.popen("ls " .. ROOT .. f))
  for name in p:lines() do
    local r = case(ROOT .. f .. "/" .. name)
    tot[r.status] = tot[r.status] + 1
    if r.frozen then tot.frozen = tot.frozen + 1 end
    if r.status == "pass" then passing[#passing + 1] = f .. "/" .. name end
    print(string.format("%s%s %s/%s %s", r.status, r.frozen and "*" or "", f, name,
      (r.why or ""):gsub("\n", " "):sub(1, 300)))
  end
  p:close()
  print(string.format("TOTAL %s pass %d (of which %d with constant inputs) fail %d unsupported %d",
    f, tot.pass, tot.frozen, tot.fail, tot.unsupported))
end
if write then
  local out = assert(io.open("spec/fixtures/onnx_conformance_pass.lua", "w"))
  out:write("-- written by tools/onnx/conformance.lua --write: the ONNX backend test cases luamx\n"
    .. "-- passes (spec/onnx_conformance_spec.lua requires each to keep passing)\nreturn {\n")
  for _, c in ipairs(passing) do out:write(string.format("  %q,\n", c)) end
  out:write("}\n")
  out:close()
end
