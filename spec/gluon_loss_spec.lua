-- gluon.loss: values against the formulas computed by hand, weighting, batch_axis,
-- numerical stability, and gradients against finite differences (float64).
local mx = require("mx")
local H = require("helpers.la")
local gradcheck = require("helpers.gradcheck")
local loss = mx.gluon.loss
local nd = mx.nd

local FILE = "gluon_loss_spec.lua"

local function t(v) return nd.array(v, { dtype = "float64" }) end
local close = require("helpers.close").within(1e-10)

local P = { { 0.5, -1.0, 2.0 }, { 1.5, 0.2, -0.3 } }   -- (2, 3)
local L = { { 1.0, 0.0, 1.5 }, { -1.0, 0.5, 0.0 } }
local function per_row(f)
  local r = {}
  for i = 1, 2 do
    local s = 0
    for j = 1, 3 do s = s + f(P[i][j], L[i][j]) end
    r[i] = s / 3
  end
  return r
end

describe("gluon.loss values", function()
  it("L2Loss is weight/2 * squared error averaged per sample", function()
    close(loss.L2Loss()(t(P), t(L)), per_row(function(p, l) return 0.5 * (l - p) ^ 2 end))
    close(loss.L2Loss { weight = 4 }(t(P), t(L)), per_row(function(p, l) return 2 * (l - p) ^ 2 end))
  end)

  it("L1Loss with sample weights", function()
    local e = per_row(function(p, l) return math.abs(l - p) end)
    close(loss.L1Loss()(t(P), t(L), t { { 2 }, { 0.5 } }), { 2 * e[1], 0.5 * e[2] })
  end)

  it("HuberLoss switches at rho", function()
    local function h(p, l)
      local d = math.abs(l - p)
      return d > 0.8 and d - 0.4 or 0.5 / 0.8 * d * d
    end
    close(loss.HuberLoss { rho = 0.8 }(t(P), t(L)), per_row(h))
  end)

  it("SigmoidBinaryCrossEntropyLoss on logits and on probabilities", function()
    local Z = { { 1, 0, 1 }, { 0, 1, 0 } }
    local zt = t(Z)
    local function sig(x) return 1 / (1 + math.exp(-x)) end
    local e = {}
    for i = 1, 2 do
      local s = 0
      for j = 1, 3 do
        local p = sig(P[i][j])
        s = s - (Z[i][j] * math.log(p) + (1 - Z[i][j]) * math.log(1 - p))
      end
      e[i] = s / 3
    end
    close(loss.SigmoidBinaryCrossEntropyLoss()(t(P), zt), e)
    close(loss.SigmoidBCELoss { from_sigmoid = true }(nd.sigmoid(t(P)), zt), e, 1e-9)
    -- pos_weight scales the positive term
    local pw = {}
    for i = 1, 2 do
      local s = 0
      for j = 1, 3 do
        local p = sig(P[i][j])
        s = s - (3 * Z[i][j] * math.log(p) + (1 - Z[i][j]) * math.log(1 - p))
      end
      pw[i] = s / 3
    end
    close(loss.SigmoidBCELoss()(t(P), zt, nil, t { 3 }), pw)
    close(loss.SigmoidBCELoss { from_sigmoid = true }(nd.sigmoid(t(P)), zt, nil, t { 3 }), pw, 1e-9)
  end)

  it("SoftmaxCrossEntropyLoss: sparse 0-based labels, dense labels, from_logits, axis", function()
    local function lse(row)
      local m = math.max(unpack(row))
      local s = 0
      for _, v in ipairs(row) do s = s + math.exp(v - m) end
      return m + math.log(s)
    end
    local lab = { 2, 0 }
    local e = {}
    for i = 1, 2 do e[i] = lse(P[i]) - P[i][lab[i] + 1] end
    close(loss.SoftmaxCrossEntropyLoss()(t(P), t(lab)), e)
    close(loss.SoftmaxCELoss { from_logits = true }(nd.log_softmax(t(P)), t(lab)), e)
    close(loss.SoftmaxCELoss()(t(P), t { { 2 }, { 0 } }), e) -- (N, 1) labels
    local dist = { { 0.2, 0.3, 0.5 }, { 1, 0, 0 } }
    local ed = {}
    for i = 1, 2 do
      local s = 0
      for j = 1, 3 do s = s + dist[i][j] * (lse(P[i]) - P[i][j]) end
      ed[i] = s
    end
    close(loss.SoftmaxCELoss { sparse_label = false }(t(P), t(dist)), ed)
    -- classes along axis 1 of a (3, 2) prediction, batch along axis 2
    local PT = t { { P[1][1], P[2][1] }, { P[1][2], P[2][2] }, { P[1][3], P[2][3] } }
    close(loss.SoftmaxCELoss { axis = 1, batch_axis = 2 }(PT, t { { 2, 0 } }), e)
    -- weight scales
    close(loss.SoftmaxCELoss { weight = 0.5 }(t(P), t(lab)), { e[1] / 2, e[2] / 2 })
  end)

  it("is numerically stable for large logits", function()
    local big = t { { 1000, -1000, 0 }, { -800, 800, 10 } }
    local l = loss.SoftmaxCrossEntropyLoss()(big, t { 1, 1 }):tolist()
    close(t(l), { 2000, 0 }, 1e-9)
    local b = loss.SigmoidBCELoss()(t { { 100, -100 } }, t { { 0, 1 } }):tolist()
    close(t(b), { 100 }, 1e-9)
  end)

  it("rejects unknown options", function()
    assert.has_error(function() loss.L2Loss { wieght = 1 } end)
    H.assert_error(function(mark) mark() loss.HuberLoss { rh = 1 } end, FILE,
      "HuberLoss: unknown option 'rh' (valid: batch_axis, rho, weight)")
    H.assert_error(function(mark) mark() loss.L1Loss(5) end, FILE,
      "L1Loss: options must be a table")
    H.assert_error(function(mark) mark() loss.SoftmaxCELoss { axis = "x" } end, FILE,
      "pick: option axis must be a 1-based axis")
    assert.has_error(function() loss.SoftmaxCELoss { batch_axis = 0 } end)
  end)
end)

describe("gluon.loss gradients (gradcheck, float64)", function()
  local function rnd(shape, lo, hi)
    local n = 1
    for _, d in ipairs(shape) do n = n * d end
    local v = {}
    for i = 1, n do v[i] = lo + (hi - lo) * math.random() end
    return nd.array(v, { dtype = "float64" }):reshape(shape)
  end
  local function check(f, inputs, wrt)
    local ok, msg = gradcheck.check(f, inputs, { wrt = wrt })
    assert.is_true(ok, msg)
  end
  before_each(function() math.randomseed(5) end)

  it("L2, L1 (away from the kink), Huber", function()
    local lab = rnd({ 3, 4 }, -1, 1)
    check(function(p) return loss.L2Loss()(p, lab) end, { rnd({ 3, 4 }, -1, 1) })
    check(function(p) return loss.L1Loss()(p, lab) end, { nd.add(lab, rnd({ 3, 4 }, 0.1, 1)) })
    check(function(p) return loss.HuberLoss { rho = 0.5 }(p, lab) end,
      { nd.add(lab, t { { 0.2, -0.2, 0.9, -0.9 }, { 0.1, 0.7, -0.3, 1.2 }, { -1.1, 0.3, 0.4, -0.6 } }) })
  end)

  it("SigmoidBCE (logits, probabilities, pos_weight)", function()
    local z = t { { 1, 0, 1 }, { 0, 0, 1 } }
    check(function(p) return loss.SigmoidBCELoss()(p, z) end, { rnd({ 2, 3 }, -3, 3) })
    check(function(p) return loss.SigmoidBCELoss()(p, z, nil, t { 2.5 }) end, { rnd({ 2, 3 }, -3, 3) })
    check(function(p) return loss.SigmoidBCELoss { from_sigmoid = true }(p, z) end,
      { rnd({ 2, 3 }, 0.1, 0.9) })
  end)

  it("SoftmaxCE sparse, dense, with sample weights", function()
    local lab = t { 0, 2, 1 }
    check(function(p) return loss.SoftmaxCELoss()(p, lab) end, { rnd({ 3, 4 }, -2, 2) })
    check(function(p) return loss.SoftmaxCELoss()(p, lab, t { { 1 }, { 0.5 }, { 2 } }) end,
      { rnd({ 3, 4 }, -2, 2) })
    local dist = nd.softmax(rnd({ 3, 4 }, -1, 1))
    check(function(p) return loss.SoftmaxCELoss { sparse_label = false }(p, dist) end,
      { rnd({ 3, 4 }, -2, 2) })
  end)
end)

describe("gluon.loss: hinge, logistic, KL, triplet, cosine, Poisson", function()
  local S = { { 1, -1, 1 }, { -1, 1, -1 } } -- signed labels
  local function rows(f, A, B)
    local r = {}
    for i = 1, 2 do
      local s = 0
      for j = 1, 3 do s = s + f(A[i][j], B[i][j], i, j) end
      r[i] = s / 3
    end
    return r
  end
  local function softplus(x) return math.log(1 + math.exp(x)) end

  it("HingeLoss and SquaredHingeLoss: max(0, margin - pred*label)(^2)", function()
    close(loss.HingeLoss()(t(P), t(S)), rows(function(p, l) return math.max(0, 1 - p * l) end, P, S))
    close(loss.HingeLoss { margin = 2, weight = 3 }(t(P), t(S)),
      rows(function(p, l) return 3 * math.max(0, 2 - p * l) end, P, S))
    close(loss.SquaredHingeLoss()(t(P), t(S)),
      rows(function(p, l) return math.max(0, 1 - p * l) ^ 2 end, P, S))
    -- hand value: row 1 is max(0, 1-0.5)^2 + max(0, 1-1)^2 + max(0, 1-2)^2 = 0.25, / 3
    close(loss.SquaredHingeLoss()(t(P), t(S)), { 0.25 / 3, (2.5 ^ 2 + 0.8 ^ 2 + 0.7 ^ 2) / 3 })
  end)

  it("LogisticLoss: log(1 + exp(-pred*label)), signed or binary labels", function()
    local want = rows(function(p, l) return softplus(-p * l) end, P, S)
    close(loss.LogisticLoss()(t(P), t(S)), want)
    local B = { { 1, 0, 1 }, { 0, 1, 0 } }
    close(loss.LogisticLoss { label_format = "binary" }(t(P), t(B)), want)
    close(loss.LogisticLoss()(t { { 800, -800 } }, t { { -1, 1 } }), { 800 }) -- stable
    H.assert_error(function(mark) mark() loss.LogisticLoss { label_format = "sign" } end, FILE,
      "LogisticLoss: label_format can only be 'signed' or 'binary', got sign")
  end)

  it("KLDivLoss: label * (log(label + 1e-12) - pred), from log-probabilities or logits", function()
    local Q = { { 0.2, 0.3, 0.5 }, { 0.6, 0.4, 0 } }
    local LP = {}
    for i = 1, 2 do
      local m = 0
      for j = 1, 3 do m = m + math.exp(P[i][j]) end
      LP[i] = {}
      for j = 1, 3 do LP[i][j] = P[i][j] - math.log(m) end
    end
    local function kl(lp, q) return q * (math.log(q + 1e-12) - lp) end
    local want = rows(kl, LP, Q)
    close(loss.KLDivLoss()(t(LP), t(Q)), want)
    close(loss.KLDivLoss { from_logits = false }(t(P), t(Q)), want)
    close(loss.KLDivLoss { from_logits = false, weight = 2 }(t(P), t(Q)), { 2 * want[1], 2 * want[2] })
  end)

  it("TripletLoss: relu(sum (pos - pred)^2 - sum (neg - pred)^2 + margin) per sample", function()
    local pos = { { 0, -1, 2.5 }, { 1.5, 0.2, -0.3 } }
    local neg = { { 1, 1, 1 }, { 1, 1, 1 } }
    local function tl(m)
      local r = {}
      for i = 1, 2 do
        local s = 0
        for j = 1, 3 do s = s + (pos[i][j] - P[i][j]) ^ 2 - (neg[i][j] - P[i][j]) ^ 2 end
        r[i] = math.max(0, s + m)
      end
      return r
    end
    close(loss.TripletLoss()(t(P), t(pos), t(neg)), tl(1))
    close(loss.TripletLoss { margin = 0.1 }(t(P), t(pos), t(neg)), tl(0.1))
    assert.are.equal(0, tl(0.1)[2]) -- the positive equals pred: clipped at 0
    close(loss.TripletLoss()(t(P), t(pos), t(neg), t { 2, 0.5 }), { 2 * tl(1)[1], 0.5 * tl(1)[2] })
    H.assert_error(function(mark) mark() loss.TripletLoss()(t(P), t(pos)) end, FILE,
      "TripletLoss: negative must be a tensor, got nil")
  end)

  it("CosineEmbeddingLoss: 1 - cos for label 1, clip(cos - margin, 0, 1 - margin) for -1", function()
    local A = { { 1, 0, 0 }, { 1, 1, 0 }, { 0, 2, 0 } }
    local B = { { 2, 0, 0 }, { 1, 0, 0 }, { 0, -1, 0 } }
    local c2 = 1 / math.sqrt(2) -- cos of rows 2; rows 1 and 3 are +1 and -1
    close(loss.CosineEmbeddingLoss()(t(A), t(B), t { 1, 1, 1 }), { 0, 1 - c2, 2 })
    close(loss.CosineEmbeddingLoss()(t(A), t(B), t { -1, -1, -1 }), { 1, c2, 0 })
    close(loss.CosineEmbeddingLoss { margin = 0.5 }(t(A), t(B), t { -1, -1, 1 }),
      { 0.5, c2 - 0.5, 2 })
    -- a zero vector: cos 0 (the norms' product floored at 1e-12), not NaN
    close(loss.CosineEmbeddingLoss()(t { { 0, 0, 0 } }, t { { 1, 2, 3 } }, t { 1 }), { 1 })
  end)

  it("PoissonNLLLoss: exp(pred) - target*pred, or pred - target*log(pred + eps), Stirling", function()
    local T = { { 0, 3, 2 }, { 1, 5, 0 } }
    close(loss.PoissonNLLLoss()(t(P), t(T)), rows(function(p, y) return math.exp(p) - y * p end, P, T))
    local R = { { 0.5, 1, 2 }, { 1.5, 0.2, 0.3 } }
    close(loss.PoissonNLLLoss { from_logits = false }(t(R), t(T)),
      rows(function(p, y) return p - y * math.log(p + 1e-8) end, R, T))
    close(loss.PoissonNLLLoss { from_logits = false }(t(R), t(T), nil, 0.5),
      rows(function(p, y) return p - y * math.log(p + 0.5) end, R, T))
    local function st(y) return y > 1 and y * math.log(y) - y + 0.5 * math.log(2 * math.pi * y) or 0 end
    close(loss.PoissonNLLLoss { compute_full = true }(t(P), t(T)),
      rows(function(p, y) return math.exp(p) - y * p + st(y) end, P, T))
  end)

  it("new losses: gradients against finite differences", function()
    math.randomseed(7)
    local function rnd(lo, hi)
      local v = {}
      for i = 1, 6 do v[i] = lo + (hi - lo) * math.random() end
      return nd.array(v, { dtype = "float64" }):reshape { 2, 3 }
    end
    local function check(f, inputs)
      local ok, msg = gradcheck.check(f, inputs)
      assert.is_true(ok, msg)
    end
    local s, q = t(S), nd.softmax(rnd(-1, 1))
    check(function(p) return loss.SquaredHingeLoss { margin = 3 }(p, s) end, { rnd(-1, 1) })
    check(function(p) return loss.LogisticLoss()(p, s) end, { rnd(-2, 2) })
    check(function(p) return loss.KLDivLoss { from_logits = false }(p, q) end, { rnd(-2, 2) })
    check(function(p, a) return loss.TripletLoss { margin = 10 }(p, a, t(L)) end,
      { rnd(-1, 1), rnd(-1, 1) })
    check(function(a, b) return loss.CosineEmbeddingLoss()(a, b, t { 1, -1 }) end,
      { rnd(0.5, 1), rnd(0.5, 1) })
    check(function(p) return loss.PoissonNLLLoss { from_logits = false }(p, t(L)) end,
      { rnd(0.5, 2) })
  end)
end)

describe("gluon.loss.SDMLLoss", function()
  -- x1 = {(0,0), (1,0)}, x2 = {(0,0), (1,1)}: squared distances d = {{0, 2}, {1, 1}};
  -- labels (s = 0.3, N = 2) = {{0.7, 0.3}, {0.3, 0.7}}; row loss = mean_j l*(log l - log p)
  local X1, X2 = { { 0, 0 }, { 1, 0 } }, { { 0, 0 }, { 1, 1 } }
  local function want(sp)
    local lse1 = math.log(1 + math.exp(-2))        -- log(e^0 + e^-2)
    local a, b = 1 - sp, sp
    local r1 = (a * (math.log(a) + lse1) + b * (math.log(b) + 2 + lse1)) / 2
    local r2 = (a * (math.log(a) + math.log(2)) + b * (math.log(b) + math.log(2))) / 2
    return { r1, r2 }
  end
  it("KL between the smoothed identity and softmax(-distance), averaged per row", function()
    close(loss.SDMLLoss()(t(X1), t(X2)), want(0.3))
    -- hand value (s = 0.3): row 2 is 0.7*(log 0.7 + log 2)/2 + 0.3*(log 0.3 + log 2)/2
    close(loss.SDMLLoss()(t(X1), t(X2)), { 0.05803185, 0.04114142 }, 1e-6)
    close(loss.SDMLLoss { smoothing_parameter = 0.1, weight = 2 }(t(X1), t(X2)),
      { 2 * want(0.1)[1], 2 * want(0.1)[2] })
    -- N = 3: off-diagonal labels are s / (N - 1); identical pairs far apart
    local l = loss.SDMLLoss { smoothing_parameter = 0.2 }(t { { 0 }, { 10 }, { 20 } },
      t { { 0 }, { 10 }, { 20 } })
    local lp = -math.log(1 + 2 * math.exp(-100)) -- row 2: own column, two at distance 100
    close(l:slice_view(2, 2), { (0.8 * (math.log(0.8) - lp) + 2 * 0.1 * (math.log(0.1) + 100 - lp)) / 3 },
      1e-9)
  end)
  it("rejects bad shapes and options at the caller's line", function()
    H.assert_error(function(mark) mark() loss.SDMLLoss()(t(X1), t { { 1, 2, 3 }, { 4, 5, 6 } }) end,
      FILE, "SDMLLoss", "(N, D)", "(2, 2)", "(2, 3)")
    H.assert_error(function(mark) mark() loss.SDMLLoss()(t { { 1, 2 } }, t { { 1, 2 } }) end,
      FILE, "SDMLLoss", "at least 2")
    H.assert_error(function(mark) mark() loss.SDMLLoss { smoothing_parameter = 2 } end,
      FILE, "SDMLLoss", "smoothing_parameter", "[0, 1]")
    H.assert_error(function(mark) mark() loss.SDMLLoss { batch_axis = 2 } end,
      FILE, "SDMLLoss", "batch_axis")
    H.assert_error(function(mark) mark() loss.SDMLLoss()(t(X1), t(X2), t { 1, 2 }) end,
      FILE, "SDMLLoss", "(x1, x2) only", "sample_weight")
  end)
  it("gradients against finite differences", function()
    math.randomseed(11)
    local function rnd()
      local v = {}
      for i = 1, 6 do v[i] = math.random() * 2 - 1 end
      return nd.array(v, { dtype = "float64" }):reshape { 3, 2 }
    end
    local ok, msg = gradcheck.check(function(a, b) return loss.SDMLLoss()(a, b) end, { rnd(), rnd() })
    assert.is_true(ok, msg)
  end)
end)
