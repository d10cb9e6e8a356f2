-- mx.gluoncv.loss's segmentation losses against GluonCV 0.10
-- (spec/fixtures/gluoncv_seg_loss.params: tools/fixtures/make_seg_loss_fixture.py): per-sample
-- values and the gradients of their sums (SoftmaxOutput's), with ignored pixels, with and
-- without the auxiliary output; and the errors.
local mx = require("mx")
local nd = mx.nd
local loss = require("mx.gluoncv.loss")

local function close(got, want, tol, what)
  local g, w = got:reshape({ -1 }):totable(), want:reshape({ -1 }):totable()
  assert.are.equal(#w, #g, what)
  for i = 1, #w do
    assert(math.abs(g[i] - w[i]) <= tol, string.format("%s[%d]: %g vs %g", what, i, g[i], w[i]))
  end
end

describe("gluoncv segmentation losses vs GluonCV 0.10", function()
  local F = nd.load("spec/fixtures/gluoncv_seg_loss.params")
  local SETTINGS = {
    plain = function() return loss.SoftmaxCrossEntropyLoss() end,
    plain_null = function() return loss.SoftmaxCrossEntropyLoss({ size_average = false }) end,
    mix = function() return loss.MixSoftmaxCrossEntropyLoss() end,
    mix_05 = function() return loss.MixSoftmaxCrossEntropyLoss({ aux_weight = 0.5 }) end,
    noaux = function() return loss.MixSoftmaxCrossEntropyLoss({ aux = false }) end,
  }
  for name, make in pairs(SETTINGS) do
    it(name .. ": values and gradients", function()
      local L = make()
      local p1, p2 = F.pred1:copy(), F.pred2:copy()
      p1:attach_grad()
      p2:attach_grad()
      local out
      mx.autograd.record(function()
        if name:match("^mix") then out = L(p1, p2, F.label) else out = L(p1, F.label) end
      end)
      out:backward()
      close(out, F[name .. ":loss"], 1e-5, name .. " loss")
      close(p1:grad(), F[name .. ":grad1"], 1e-6, name .. " grad1")
      if name:match("^mix") then close(p2:grad(), F[name .. ":grad2"], 1e-6, name .. " grad2") end
    end)
  end

  it("errors", function()
    assert.has_error(function() loss.MixSoftmaxCrossEntropyLoss({ mixup = true }) end)
    assert.has_error(function() loss.SoftmaxCrossEntropyLoss({ ignore_label = 0.5 }) end,
      "SoftmaxCrossEntropyLoss: ignore_label must be an integer, got 0.5")
    local ok, err = pcall(function()
      local l = loss.SoftmaxCrossEntropyLoss()(nd.ones({ 2, 3, 4, 4 }), nd.ones({ 2, 4 }))
      return l
    end)
    assert.is_false(ok)
    assert.truthy(err:find("label (2, 4) must be pred's shape (2, 3, 4, 4) without the class "
      .. "axis", 1, true), err)
    assert.truthy(err:find("gluoncv_seg_loss_spec.lua", 1, true), err)
  end)
end)
