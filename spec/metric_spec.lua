-- gluon.metric: values computed by hand.
local mx = require("mx")
local H = require("helpers.la")
local metric = mx.gluon.metric
local nd = mx.nd

local FILE = "metric_spec.lua"

local function near(a, b, tol) assert.is_true(math.abs(a - b) <= (tol or 1e-9), a .. " vs " .. b) end

describe("gluon.metric", function()
  it("Accuracy: argmax over the class axis, 0-based labels, accumulates over updates", function()
    local acc = metric.Accuracy()
    local name, v = acc:get()
    assert.are.equal("accuracy", name)
    assert.is_true(v ~= v) -- nan before any update
    acc:update(nd.array { 0, 1, 2, 1 }, nd.array { { 0.9, 0.1, 0 }, { 0.2, 0.3, 0.5 },
      { 0, 0, 1 }, { 0.1, 0.8, 0.1 } })
    v = select(2, acc:get())
    near(v, 3 / 4)
    acc:update({ nd.array { 1, 1 } }, { nd.array { 1, 0 } }) -- class ids directly
    v = select(2, acc:get())
    near(v, 4 / 6)
    acc:reset()
    assert.are.equal(0, acc.num_inst)
    assert.has_error(function() acc:update({ nd.array { 1 } }, {}) end)
  end)

  it("Accuracy along another axis", function()
    local acc = metric.Accuracy { axis = 1 }
    -- pred (classes=2, N=3)
    acc:update(nd.array { 1, 0, 1 }, nd.array { { 0.1, 0.9, 0.4 }, { 0.9, 0.1, 0.3 } })
    local _, v = acc:get()
    near(v, 2 / 3)
  end)

  it("TopKAccuracy", function()
    local m = metric.TopKAccuracy { top_k = 2 }
    m:update(nd.array { 2, 0, 1 }, nd.array { { 0.1, 0.5, 0.4 }, { 0.2, 0.3, 0.5 },
      { 0.6, 0.3, 0.1 } })
    local name, v = m:get()
    assert.are.equal("top_k_accuracy_2", name)
    near(v, 2 / 3)
  end)

  it("MAE, MSE, RMSE average per-sample means", function()
    local l = nd.array { { 1, 2 }, { 3, 4 } }
    local p = nd.array { { 1.5, 2 }, { 1, 4 } }
    local mae, mse, rmse = metric.MAE(), metric.MSE(), metric.RMSE()
    for _, m in ipairs { mae, mse, rmse } do m:update(l, p) end
    near(select(2, mae:get()), (0.25 + 1) / 2)
    near(select(2, mse:get()), (0.125 + 2) / 2)
    near(select(2, rmse:get()), math.sqrt((0.125 + 2) / 2))
  end)

  it("CrossEntropy and Loss", function()
    local ce = metric.CrossEntropy()
    ce:update(nd.array { 0, 2 }, nd.array { { 0.5, 0.25, 0.25 }, { 0.1, 0.1, 0.8 } })
    near(select(2, ce:get()), -(math.log(0.5) + math.log(0.8)) / 2, 1e-6)
    local l = metric.Loss()
    l:update(nil, nd.array { 1, 2, 3 })
    l:update(nil, { nd.array { 6 } })
    near(select(2, l:get()), 3)
  end)

  it("F1 over binary predictions (scores or probabilities)", function()
    local f = metric.F1()
    -- tp=2, fp=1, fn=1 -> precision 2/3, recall 2/3
    f:update(nd.array { 1, 1, 0, 1, 0 }, nd.array { 0.9, 0.8, 0.7, 0.2, 0.1 })
    near(select(2, f:get()), 2 / 3)
    local g = metric.F1()
    g:update(nd.array { 1, 0 }, nd.array { { 0.2, 0.8 }, { 0.6, 0.4 } })
    near(select(2, g:get()), 1)
  end)

  it("CompositeEvalMetric and create", function()
    local c = metric.CompositeEvalMetric { "acc", metric.CrossEntropy() }
    c:add(metric.TopKAccuracy())
    c:update(nd.array { 0, 1 }, nd.array { { 0.75, 0.25 }, { 0.5, 0.5 } })
    local names, values = c:get()
    assert.are.same({ "accuracy", "cross-entropy", "top_k_accuracy_1" }, names)
    near(values[1], 0.5)
    assert.are.equal(3, #c:get_name_value())
    assert.are.equal("accuracy", (metric.create("acc"):get()))
    assert.has_error(function() metric.create("nope") end)
    assert.are.equal(metric, mx.metric)
  end)

  it("raises shape errors at the line that called update", function()
    local lab, pred = nd.array { 0, 1, 1 }, nd.array { { 0.5, 0.5 }, { 0.2, 0.8 } }
    H.assert_error(function(mark) mark() metric.Accuracy():update(lab, pred) end, FILE,
      "Accuracy.update: labels[1] has 3 elements but preds[1] gives 2")
    H.assert_error(function(mark) mark() metric.TopKAccuracy():update(lab, pred) end, FILE,
      "TopKAccuracy.update: preds[1] must be (N, classes)")
    H.assert_error(function(mark) mark() metric.CrossEntropy():update(lab, pred) end, FILE,
      "CrossEntropy.update: preds[1] must be (N, classes)")
    H.assert_error(function(mark) mark() metric.MSE():update(lab, pred) end, FILE,
      "MSE.update: labels[1] has 3 elements but preds[1] has 4")
    H.assert_error(function(mark) mark() metric.MAE():update({ lab }, {}) end, FILE,
      "1 labels but 0 predictions")
    H.assert_error(function(mark) mark() metric.Loss():update(nil, 5) end, FILE,
      "Loss.update: preds must be a tensor or a list of tensors")
  end)

  it("checks class-id labels against preds: range, integrality, NaN", function()
    local p2 = nd.array { { 0.5, 0.5 } }
    for _, bad in ipairs { 1e7, 2, -1, 0.5, 0 / 0, math.huge } do
      local msg = H.assert_error(function(mark) mark() metric.CrossEntropy():update(nd.array { bad }, p2) end,
        FILE, "CrossEntropy.update: labels[1] element 1 is")
      assert.is_truthy(msg:find("class id in [0, 2)", 1, true), msg)
      assert.is_truthy(msg:find("preds[1] has shape (1, 2)", 1, true), msg)
      H.assert_error(function(mark) mark() metric.Accuracy():update(nd.array { bad }, p2) end,
        FILE, "Accuracy.update: labels[1] element 1 is")
      H.assert_error(function(mark) mark() metric.TopKAccuracy():update(nd.array { bad }, p2) end,
        FILE, "TopKAccuracy.update: labels[1] element 1 is")
      H.assert_error(function(mark) mark() metric.F1():update(nd.array { bad }, p2) end,
        FILE, "F1.update: labels[1] element 1 is")
    end
    -- class ids as preds: labels must still be integers
    H.assert_error(function(mark) mark() metric.Accuracy():update(nd.array { 1.5 }, nd.array { 1 }) end,
      FILE, "Accuracy.update: labels[1] element 1 is 1.5")
    -- int labels of every width are read as class ids
    local ce = metric.CrossEntropy()
    ce:update(nd.array({ 1 }, { dtype = "int32" }), nd.array { { 0.25, 0.75 } })
    near(select(2, ce:get()), -math.log(0.75), 1e-6)
  end)

  it("checks counts and shapes for every metric, at the caller's line", function()
    local lab3 = nd.array { 1, 0, 1 }
    -- F1 with fewer predictions than labels used to read past the end
    H.assert_error(function(mark) mark() metric.F1():update(lab3, nd.array { 0.3 }) end, FILE,
      "F1.update: preds[1] must be (N, 2) scores or N probabilities")
    H.assert_error(function(mark) mark() metric.Accuracy():update({ lab3 }, { 3 }) end, FILE,
      "Accuracy.update: preds[1] must be a tensor, got number")
    H.assert_error(function(mark) mark() metric.Accuracy { axis = 3 }:update(lab3, nd.zeros { 3, 2 }) end,
      FILE, "Accuracy.update: axis 3 is out of range")
    H.assert_error(function(mark) mark() metric.MAE():update(nd.zeros { 2, 3 }, nd.zeros { 3, 2 }) end,
      FILE, "MAE.update: labels[1] has 2 samples but preds[1] has 3")
    H.assert_error(function(mark) mark() metric.CrossEntropy():update(nd.array { 0 },
      nd.zeros { 1, 2, 2 }) end, FILE, "CrossEntropy.update: preds[1] must be (N, classes)")
    -- a composite's members blame the user's line too
    H.assert_error(function(mark) mark() metric.CompositeEvalMetric { "acc", "ce" }:update(nd.array { 5 },
      nd.array { { 0.3, 0.7 } }) end, FILE, "Accuracy.update: labels[1] element 1 is 5")
    H.assert_error(function(mark) mark() metric.TopKAccuracy { top_k = 0 } end, FILE,
      "TopKAccuracy: top_k must be a positive integer")
    -- empty batches add nothing (no NaN)
    local mse = metric.MSE()
    mse:update(nd.zeros { 0 }, nd.zeros { 0 })
    mse:update(nd.array { 1 }, nd.array { 3 })
    near(select(2, mse:get()), 4)
  end)
  it("F1 / Fbeta binary: column 2 of (N, 2) scores against threshold (MXNet 2.0 docs)", function()
    local p = nd.array { { 0.3, 0.7 }, { 0, 1 }, { 0.4, 0.6 } }
    local y = nd.array { 0, 1, 1 }
    local f, fb = metric.F1(), metric.Fbeta { beta = 2 }
    f:update(y, p)
    fb:update(y, p)
    -- tp=2, fp=1, fn=0: P=2/3, R=1
    near(select(2, f:get()), 2 * (2 / 3) / (2 / 3 + 1))
    near(select(2, fb:get()), 5 * (2 / 3) / (4 * 2 / 3 + 1))
    assert.are.equal(3, f.num_inst)
    -- threshold applies to the positive column: 0.6 and 0.7 > 0.65? only 0.7 and 1
    local t = metric.F1 { threshold = 0.65 }
    t:update(y, p) -- positives: rows 1, 2: tp=1, fp=1, fn=1
    near(select(2, t:get()), 0.5)
    H.assert_error(function(mark) mark() metric.F1():update(nd.array { 1 }, nd.array { { 0.1, 0.2, 0.7 } })
    end,
      FILE, "F1.update: preds[1] has 3 classes, too many for class_type 'binary'")
  end)

  it("F1 multiclass: macro is the mean over classes, micro pools the counts", function()
    local y = nd.array { 0, 0, 0, 1 }
    local p = nd.array { { 0.9, 0.1 }, { 0.8, 0.2 }, { 0.7, 0.3 }, { 0.6, 0.4 } } -- all class 0
    local mi = metric.F1 { class_type = "multiclass" }
    local ma = metric.F1 { class_type = "multiclass", average = "macro" }
    -- split over two updates: counts accumulate, the average is over classes, not batches
    for _, m in ipairs { mi, ma } do
      m:update(nd.array { 0, 0 }, nd.array { { 0.9, 0.1 }, { 0.8, 0.2 } })
      m:update(nd.array { 0, 1 }, nd.array { { 0.7, 0.3 }, { 0.6, 0.4 } })
    end
    -- class 0: tp 3 fp 1 fn 0 -> F 6/7; class 1: tp 0 fp 0 fn 1 -> F 0
    near(select(2, ma:get()), (6 / 7 + 0) / 2)
    -- pooled: tp 3, fp 1, fn 1 -> 0.75
    near(select(2, mi:get()), 0.75)
    assert.are.equal(4, mi.num_inst)
    local one = metric.F1 { class_type = "multiclass", average = "macro" }
    one:update(y, p)
    near(select(2, one:get()), 3 / 7)
    H.assert_error(function(mark) mark() one:update(nd.array { 0 }, nd.array { { 1, 0, 0 } }) end,
      FILE, "F1.update: the number of classes changed from 2 to 3")
  end)

  it("F1 multilabel thresholds every element; num_inst counts samples", function()
    local y = nd.array { { 1, 0 }, { 1, 1 } }
    local p = nd.array { { 0.9, 0.2 }, { 0.3, 0.8 } }
    local mi = metric.F1 { class_type = "multilabel" }
    local ma = metric.F1 { class_type = "multilabel", average = "macro" }
    mi:update(y, p)
    ma:update(y, p)
    near(select(2, mi:get()), 2 * 1 * (2 / 3) / (1 + 2 / 3)) -- tp 2, fp 0, fn 1
    near(select(2, ma:get()), (2 / 3 + 1) / 2)
    assert.are.equal(2, mi.num_inst)
    H.assert_error(function(mark) mark() mi:update(y, nd.array { 0.5, 0.5 }) end, FILE,
      "F1.update: labels[1] and preds[1] must have the same shape for class_type 'multilabel'")
  end)

  it("MCC and PCC: Matthews correlation from the confusion counts", function()
    -- tp 3, tn 2, fp 1, fn 1
    local y = nd.array { 1, 1, 1, 1, 0, 0, 0 }
    local p = nd.array { 0.9, 0.8, 0.7, 0.2, 0.1, 0.3, 0.6 }
    local mcc = metric.MCC()
    mcc:update(y, p)
    local want = (3 * 2 - 1 * 1) / math.sqrt((3 + 1) * (3 + 1) * (2 + 1) * (2 + 1))
    near(select(2, mcc:get()), want)
    assert.are.equal(7, mcc.num_inst)
    local pcc = metric.PCC()
    local s = nd.array { { 0.1, 0.9 }, { 0.2, 0.8 }, { 0.3, 0.7 }, { 0.8, 0.2 }, { 0.9, 0.1 },
      { 0.7, 0.3 }, { 0.4, 0.6 } }
    pcc:update(y, s)
    near(select(2, pcc:get()), want)
    -- multiclass, class ids as preds; the matrix grows to 3 classes
    pcc:reset()
    pcc:update(nd.array { 0, 1, 2, 2 }, nd.array { 0, 2, 2, 1 })
    pcc:update(nd.array { 1 }, nd.array { 1 })
    assert.are.equal(2, pcc.num_inst) -- counts updates, as MXNet 2.0
    -- C[pred][label]
    local C = { { 1, 0, 0 }, { 0, 1, 1 }, { 0, 1, 1 } }
    local n, x, yy = 0, { 0, 0, 0 }, { 0, 0, 0 }
    for a = 1, 3 do for b = 1, 3 do n, x[a], yy[b] = n + C[a][b], x[a] + C[a][b], yy[b] + C[a][b] end end
    local cxx, cyy, cxy = 0, 0, 0
    for a = 1, 3 do
      cxx, cyy, cxy = cxx + x[a] * (n - x[a]), cyy + yy[a] * (n - yy[a]), cxy + C[a][a] * n - x[a] * yy[a]
    end
    near(select(2, pcc:get()), cxy / math.sqrt(cxx * cyy))
  end)

  it("CrossEntropy from_logits, axis, ignore_label; NLL and Perplexity", function()
    local ce = metric.CrossEntropy { from_logits = true }
    ce:update(nd.array { 2, 0, 1 }, nd.array { { 1, 2, 3 }, { 1000, 0, -1000 }, { 1000, 0, -1000 } })
    local e = math.exp
    local l1 = -math.log(e(3) / (e(1) + e(2) + e(3)))
    local l3 = -math.log(1e-12) -- softmax gives 0 for label 1 of row 3: eps, not NaN
    near(select(2, ce:get()), (l1 + 0 + l3) / 3, 1e-9)
    local ax = metric.CrossEntropy { axis = 1 } -- classes along the first axis
    ax:update(nd.array { 1, 0 }, nd.array { { 0.25, 0.6 }, { 0.75, 0.4 } })
    near(select(2, ax:get()), -(math.log(0.75) + math.log(0.6)) / 2, 1e-7)
    local ig = metric.CrossEntropy { ignore_label = -1 }
    ig:update(nd.array { 1, -1 }, nd.array { { 0.5, 0.5 }, { 0.1, 0.9 } })
    assert.are.equal(1, ig.num_inst)
    near(select(2, ig:get()), -math.log(0.5), 1e-7)
    -- MXNet 2.0 docs: picks 0.3, 1.0, 0.6
    local p = nd.array { { 0.3, 0.7 }, { 0, 1 }, { 0.4, 0.6 } }
    local y = nd.array { 0, 1, 1 }
    local perp, nll = metric.Perplexity(), metric.NegativeLogLikelihood()
    perp:update(y, p)
    nll:update(y, p)
    local mean = -(math.log(0.3) + math.log(1) + math.log(0.6)) / 3
    near(select(2, perp:get()), math.exp(mean), 1e-6)
    local name, v = nll:get()
    assert.are.equal("nll-loss", name)
    near(v, mean, 1e-6)
  end)

  it("PearsonCorrelation over all elements of all updates", function()
    local ls = { 1, 0, 0, 1, 0, 1 }
    local ps = { 0.3, 0.7, 0, 1, 0.4, 0.6 }
    local m = metric.PearsonCorrelation()
    m:update(nd.array { { 1, 0 }, { 0, 1 } }, nd.array { { 0.3, 0.7 }, { 0, 1 } })
    m:update(nd.array { { 0, 1 } }, nd.array { { 0.4, 0.6 } })
    assert.are.equal(2, m.num_inst) -- counts (label, pred) pairs, as MXNet 2.0
    local ml, mp = 0, 0
    for i = 1, 6 do ml, mp = ml + ls[i] / 6, mp + ps[i] / 6 end
    local c, a, b = 0, 0, 0
    for i = 1, 6 do
      c, a, b = c + (ls[i] - ml) * (ps[i] - mp), a + (ls[i] - ml) ^ 2, b + (ps[i] - mp) ^ 2
    end
    near(select(2, m:get()), c / math.sqrt(a * b), 1e-7)
    H.assert_error(function(mark) mark() m:update(nd.array { 1, 2 }, nd.array { { 1, 2 } }) end, FILE,
      "PearsonCorrelation.update: labels[1] and preds[1] must have the same shape")
  end)

  it("every constructor rejects unknown options, naming the metric and the valid ones", function()
    for _, name in ipairs { "Accuracy", "TopKAccuracy", "F1", "Fbeta", "MCC", "MAE", "MSE", "RMSE",
      "CrossEntropy", "NegativeLogLikelihood", "Perplexity", "PearsonCorrelation", "PCC", "Loss" } do
      local msg = H.assert_error(function(mark) mark() metric[name] { bogus = 1 } end, FILE,
        name .. ": unknown option 'bogus' (valid: ")
      assert.is_truthy(msg:find("name", 1, true), msg)
    end
    H.assert_error(function(mark) mark() metric.CompositeEvalMetric({ "acc" }, { nme = "x" }) end, FILE,
      "CompositeEvalMetric: unknown option 'nme' (valid: name)")
    H.assert_error(function(mark) mark() metric.create("f1", { averge = "macro" }) end, FILE,
      "F1: unknown option 'averge' (valid: average, class_type, name, threshold)")
    H.assert_error(function(mark) mark() metric.F1 { class_type = "multi" } end, FILE,
      "F1: class_type must be 'binary', 'multiclass' or 'multilabel'")
    H.assert_error(function(mark) mark() metric.CrossEntropy { from_logits = 1 } end, FILE,
      "CrossEntropy: from_logits must be a boolean")
  end)

  it("get_config round-trips through create; create knows every name", function()
    local f = metric.F1 { class_type = "multiclass", average = "macro", name = "myf1" }
    local cfg = f:get_config()
    assert.are.same({ metric = "F1", name = "myf1", class_type = "multiclass", average = "macro",
      threshold = 0.5 }, cfg)
    assert.are.same(cfg, metric.create(cfg):get_config())
    local c = metric.CompositeEvalMetric { "acc", metric.TopKAccuracy { top_k = 3 } }
    local cc = c:get_config()
    assert.are.equal("top_k_accuracy_3", metric.create(cc).metrics[2].name)
    assert.are.same(cc, metric.create(cc):get_config())
    for name, want in pairs { f1 = "f1", fbeta = "fbeta", mcc = "mcc", pcc = "pcc", pearsonr = "pearsonr",
      perplexity = "perplexity", nll_loss = "nll-loss", ce = "cross-entropy", top_k_acc = "top_k_accuracy_1",
      PearsonCorrelation = "pearsonr", NegativeLogLikelihood = "nll-loss" } do
      assert.are.equal(want, (metric.create(name):get()))
    end
    assert.are.equal("fbeta", (metric.create("fbeta", { beta = 2 }):get()))
    local msg = H.assert_error(function(mark) mark() metric.create("nope") end, FILE,
      "metric.create: unknown metric nope (known: ")
    assert.is_truthy(msg:find("pcc", 1, true))
  end)
end)
