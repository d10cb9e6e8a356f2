-- Every differentiable op of the op table against central differences (float64), at the
-- shapes of its cases in spec/helpers/gradcases.lua, and again with every differentiated
-- input taken as a leading-axis view x[2] of a bigger base.
local mx = require("mx")
local lib = require("mx.core.lib")
local gradcheck = require("helpers.gradcheck")
local cases = require("helpers.gradcases")

local function case_list(c)
  if c == nil then return {} end
  if c.inputs then return { c } end
  return c
end

describe("op table gradient coverage", function()
  it("every op has a grad formula or is marked nondiff", function()
    local bad = {}
    for _, op in ipairs(lib.ops) do
      if not op.grad and not op.nondiff then bad[#bad + 1] = op.name end
      if op.grad and op.nondiff then bad[#bad + 1] = op.name .. " (both grad and nondiff)" end
    end
    assert.are.same({}, bad)
  end)

  it("every op with a grad formula has a gradcheck case in spec/helpers/gradcases.lua", function()
    local missing = {}
    for _, op in ipairs(lib.ops) do
      if op.grad and #case_list(cases[op.name]) == 0 then missing[#missing + 1] = op.name end
    end
    assert.are.same({}, missing)
  end)

  it("every case names an op of the table that has a grad", function()
    local stray = {}
    for name in pairs(cases) do
      local op = lib.ops_by_name[name]
      if not op or not op.grad then stray[#stray + 1] = name end
    end
    table.sort(stray)
    assert.are.same({}, stray)
  end)
end)

describe("gradcheck", function()
  -- sorted op names: a stable order, so a random-seed failure reproduces
  local names = {}
  for _, op in ipairs(lib.ops) do
    if op.grad and cases[op.name] then names[#names + 1] = op.name end
  end
  table.sort(names)
  for _, name in ipairs(names) do
    for i, case in ipairs(case_list(cases[name])) do
      local variants = case.noview and { "plain" } or { "plain", "view" }
      for _, variant in ipairs(variants) do
        it(name .. " " .. gradcheck.label(case, i) .. (variant == "view" and " as x[2]" or ""),
          function()
            math.randomseed(1234 + i)
            local ok, msg = gradcheck.run_case(mx, name, case, variant)
            assert(ok, name .. ": " .. tostring(msg))
          end)
      end
    end
  end
end)

describe("gradcheck helper", function()
  local function square_fn(factor)
    local Sq = mx.autograd.Function:extend()
    function Sq.forward(self, x)
      self:save_for_backward(x)
      return x * x
    end
    function Sq.backward(self, dy) return dy * self.saved_tensors[1] * factor end
    return function(a) return Sq()(a) end
  end

  it("fails on a wrong gradient formula (the check can fail)", function()
    local x = mx.nd.array({ 0.3, -0.7, 1.1 }, { dtype = "float64" })
    local ok, msg = gradcheck.check(square_fn(4), { x }) -- d/dx x^2 is 2x, not 4x
    assert.is_false(ok)
    assert.matches("analytic", msg)
  end)

  it("passes on a right one", function()
    local x = mx.nd.array({ 0.3, -0.7, 1.1 }, { dtype = "float64" })
    local ok, msg = gradcheck.check(square_fn(2), { x })
    assert(ok, msg)
  end)
end)
