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

  it("checks class-id labels against preds: range, integrality, NaN (issue 10)", function()
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
end)
