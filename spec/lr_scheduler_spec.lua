-- mx.lr_scheduler: values against MXNet's formulas computed by hand.
local mx = require("mx")
local lrs = mx.lr_scheduler

local function near(a, b) assert.is_true(math.abs(a - b) <= 1e-12 * math.max(1, math.abs(b)),
  string.format("%.17g vs %.17g", a, b)) end

describe("lr_scheduler", function()
  it("FactorScheduler decays every step updates, floored at stop_factor_lr", function()
    local s = lrs.FactorScheduler(10, { factor = 0.5, base_lr = 1, stop_factor_lr = 0.1 })
    near(s(1), 1)
    near(s(10), 1)      -- num_update > count + step is strict
    near(s(11), 0.5)
    near(s(20), 0.5)
    near(s(21), 0.25)
    near(s(35), 0.125)
    near(s(100), 0.1)   -- floored
  end)

  it("FactorScheduler with linear and constant warm-up", function()
    local s = lrs.FactorScheduler(5, { factor = 0.1, base_lr = 1, warmup_steps = 4,
      warmup_begin_lr = 0.2 })
    near(s(0), 0.2)
    near(s(2), 0.2 + 0.8 * 2 / 4)
    near(s(4), 1)
    near(s(6), 0.1)
    local c = lrs.FactorScheduler(5, { base_lr = 1, warmup_steps = 4, warmup_begin_lr = 0.3,
      warmup_mode = "constant" })
    near(c(3), 0.3)
    near(c(4), 1)
  end)

  it("MultiFactorScheduler multiplies after each listed step", function()
    local s = lrs.MultiFactorScheduler({ 3, 7 }, { factor = 0.5, base_lr = 2 })
    near(s(1), 2)
    near(s(3), 2)
    near(s(4), 1)
    near(s(7), 1)
    near(s(8), 0.5)
    near(s(1000), 0.5)
  end)

  it("PolyScheduler follows (1 - t/T)^pwr to final_lr", function()
    local s = lrs.PolyScheduler(10, { base_lr = 1, pwr = 2, final_lr = 0.1 })
    near(s(0), 1)
    near(s(5), 0.1 + 0.9 * 0.25)
    near(s(10), 0.1)
    near(s(20), 0.1)
    local w = lrs.PolyScheduler(12, { base_lr = 1, pwr = 1, warmup_steps = 2 })
    near(w(1), 0.5)
    near(w(7), 1 - 5 / 10)
  end)

  it("CosineScheduler follows half a cosine to final_lr", function()
    local s = lrs.CosineScheduler(8, { base_lr = 2, final_lr = 0 })
    near(s(0), 2)
    near(s(2), (1 + math.cos(math.pi * 2 / 8)))
    near(s(4), 1)
    near(s(8), 0)
    near(s(9), 0)
  end)

  it("rejects bad arguments with clear messages", function()
    assert.has_error(function() lrs.FactorScheduler(0) end)
    assert.has_error(function() lrs.FactorScheduler(5, { factor = 2 }) end,
      "FactorScheduler: factor must be no more than 1 to make lr reduce")
    assert.has_error(function() lrs.MultiFactorScheduler({ 5, 3 }) end,
      "MultiFactorScheduler: schedule steps must be increasing")
    assert.has_error(function() lrs.CosineScheduler(10, { bogus = 1 }) end)
    assert.has_error(function() lrs.PolyScheduler(10, { warmup_mode = "x" }) end)
  end)
end)
