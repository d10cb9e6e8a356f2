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
      "Accuracy: label has 3 elements")
    H.assert_error(function(mark) mark() metric.TopKAccuracy():update(lab, pred) end, FILE,
      "TopKAccuracy: pred must be")
    H.assert_error(function(mark) mark() metric.CrossEntropy():update(lab, pred) end, FILE,
      "CrossEntropy: pred must be")
    H.assert_error(function(mark) mark() metric.MSE():update(lab, pred) end, FILE,
      "MSE: label has 3 elements, pred 4")
    H.assert_error(function(mark) mark() metric.MAE():update({ lab }, {}) end, FILE,
      "1 labels but 0 predictions")
    H.assert_error(function(mark) mark() metric.Loss():update(nil, 5) end, FILE,
      "expected a tensor or a list of tensors")
  end)
end)
