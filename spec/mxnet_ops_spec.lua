-- Ops against real MXNet 1.9.1 on edge values: spec/fixtures/mx191_ops.lua holds MXNet's
-- outputs for fixed inputs (edge values: +-0, +-0.5, NaN, +-Inf) and, per case, the luamx
-- call that must give them (tools/fixtures/make_mxnet_ops_fixture.py wrote both). Index
-- results are compared 0-based (the lua expression subtracts luamx's 1).
local mx = require("mx")
local nd = mx.nd
local cases = dofile("spec/fixtures/mx191_ops.lua")

local function flat(t, out)
  out = out or {}
  if type(t) ~= "table" then out[#out + 1] = t return out end
  for i = 1, #t do flat(t[i], out) end
  return out
end

local function close(a, b, tol)
  if a ~= a or b ~= b then return a ~= a and b ~= b end
  if a == b then return true end -- infinities, exact zeros
  return math.abs(a - b) <= tol * math.max(1, math.abs(b))
end

describe("ops against MXNet 1.9.1 (spec/fixtures/mx191_ops.lua)", function()
  it("gives MXNet's values, NaN and Inf included, for " .. #cases .. " cases", function()
    local bad = {}
    for _, c in ipairs(cases) do
      local env = { nd = nd, select = select }
      local names = { "x", "y", "z" }
      for i, inp in ipairs(c.inputs) do
        env[names[i]] = nd.array(inp[1], { dtype = inp.dtype })
      end
      local f = assert(load("return " .. c.lua, c.name, "t", env))
      local ok, r = pcall(f)
      if not ok then
        bad[#bad + 1] = c.name .. ": " .. tostring(r)
      else
        local shape = r:shape()
        local want = c.values
        local got = flat(r:astype("float64"):tolist())
        if #shape ~= #c.shape then
          -- MXNet 1.9 gives (1,) for a full reduction where luamx gives a 0-d tensor
          if not (#c.shape == 1 and c.shape[1] == 1 and #shape == 0) then
            bad[#bad + 1] = c.name .. ": shape (" .. table.concat(shape, ", ") .. ") vs MXNet's ("
              .. table.concat(c.shape, ", ") .. ")"
          end
        else
          for d = 1, #shape do
            if shape[d] ~= c.shape[d] then
              bad[#bad + 1] = c.name .. ": shape (" .. table.concat(shape, ", ") .. ") vs MXNet's ("
                .. table.concat(c.shape, ", ") .. ")"
              break
            end
          end
        end
        for k = 1, #want do
          if not close(got[k], want[k], c.tol) then
            bad[#bad + 1] = string.format("%s: element %d is %s, MXNet gives %s", c.name, k,
              tostring(got[k]), tostring(want[k]))
            break
          end
        end
      end
    end
    assert.are.same({}, bad)
  end)
end)
