-- mx.gluoncv.loss against GluonCV 0.10 (spec/fixtures/gluoncv_loss.params:
-- tools/fixtures/make_gluoncv_loss_fixture.py): SSDMultiBoxLoss's per-sample losses and the
-- gradients of their sum, a batch split over two "devices" as GluonCV's lists.
local mx = require("mx")
local nd = mx.nd
local H = require("helpers.la")
local SSDMultiBoxLoss = require("mx.gluoncv.loss").SSDMultiBoxLoss
local FILE = "gluoncv_loss_spec.lua"

local F = nd.load("spec/fixtures/gluoncv_loss.params")

local function close(got, want, tol, what)
  local d = H.maxdiff(got, want)
  assert(d <= tol, string.format("%s: max difference %g", what, d))
end

local CASES = { a = {}, b = { negative_mining_ratio = 2.5, rho = 0.5, lambd = 2,
  min_hard_negatives = 4 } }

local function halves(x)
  return { x:slice_axis { axis = 1, begin = 1, ["end"] = 2 },
    x:slice_axis { axis = 1, begin = 3, ["end"] = 4 } }
end

describe("gluoncv SSDMultiBoxLoss", function()
  for k, opts in pairs(CASES) do
    it("equals GluonCV's losses and gradients (case " .. k .. ")", function()
      local loss = SSDMultiBoxLoss(opts)
      local cp, bp = F.cls_pred:copy(), F.box_pred:copy()
      cp:attach_grad()
      bp:attach_grad()
      local s, c, b
      mx.autograd.record(function()
        s, c, b = loss(halves(cp), halves(bp), halves(F.cls_target), halves(F.box_target))
        nd.add(nd.sum(s[1]), nd.sum(s[2])):backward()
      end)
      close(nd.concat(s, { dim = 1 }), F[k .. "_sum"], 1e-5, "sum")
      close(nd.concat(c, { dim = 1 }), F[k .. "_cls"], 1e-5, "cls")
      close(nd.concat(b, { dim = 1 }), F[k .. "_box"], 1e-5, "box")
      close(cp:grad(), F[k .. "_gcls"], 1e-6, "cls_pred gradient")
      close(bp:grad(), F[k .. "_gbox"], 1e-6, "box_pred gradient")
    end)
  end

  it("gives zero losses without positives, and checks its options", function()
    local s, c, b = SSDMultiBoxLoss()(F.cls_pred, F.box_pred, nd.zeros { 4, 60 }, F.box_target)
    assert.are.equal(0, s[1]:item())
    assert.are.equal(0, c[1]:item())
    assert.are.equal(0, b[1]:item())
    H.assert_error(function(mark) mark() SSDMultiBoxLoss { ratio = 3 } end, FILE,
      "SSDMultiBoxLoss", "ratio")
  end)
end)
