-- MXNet 1.9.1's tests/python/unittest/test_attr.py, ported (spec/upstream/README.md).
-- Python's pickle round trip is the symbol JSON's here (tojson / load_json).
local mx = require("mx")
local S = mx.sym
local C = require("upstream.common")
local F = "test_attr.py"
local case = C.cases(it, function(why) pending(why) end)

local function contain(x, y)
  for k, v in pairs(x) do
    if y[k] == nil then return false end
    if type(y[k]) == "table" then
      if type(v) ~= "table" or not contain(v, y[k]) then return false end
    elseif y[k] ~= v then
      return false
    end
  end
  return true
end

describe("MXNet 1.9.1 tests/python/unittest", function()
  case(F, "test_attr_basic", function()
    local data, gdata
    mx.AttrScope({ group = "4", data = "great" }, function()
      data = S.Variable("data", { attr = { dtype = "data", group = "1", force_mirroring = "True" },
        lr_mult = 1 })
      gdata = S.Variable("data2")
    end)
    assert.equal("4", gdata:attr("group"))
    assert.equal("1", data:attr("group"))
    assert.equal("1", tostring(tonumber(data:attr("lr_mult"))))
    assert.equal("1", tostring(tonumber(data:attr("__lr_mult__"))))
    assert.equal("True", data:attr("force_mirroring"))
    assert.equal("True", data:attr("__force_mirroring__"))
    local data2 = S.load_json(data:tojson())
    assert.equal(data:attr("dtype"), data2:attr("dtype"))
  end)

  case(F, "test_operator", function()
    local data = S.Variable("data")
    local fc1, fc2
    mx.AttrScope({ __group__ = "4", __data__ = "great" }, function()
      fc1 = S.Activation(data, { act_type = "relu" })
      mx.AttrScope({ __init_bias__ = "0.0" }, function()
        fc2 = S.FullyConnected(fc1, { num_hidden = 10, name = "fc2" })
      end)
    end)
    assert.equal("great", fc1:attr("__data__"))
    assert.equal("great", fc2:attr("__data__"))
    assert.equal("0.0", fc2:attr("__init_bias__"))
    local fc2copy = S.load_json(fc2:tojson())
    assert.equal(fc2:tojson(), fc2copy:tojson())
    assert.is_truthy(fc2:get_internals()["fc2_weight"])
  end)

  case(F, "test_list_attr", function()
    local data = S.Variable("data", { attr = { mood = "angry" } })
    local op = S.Convolution(data, { name = "conv", kernel = { 1, 1 }, num_filter = 1,
      attr = { __mood__ = "so so", wd_mult = "x" } })
    assert.is_true(contain({ __mood__ = "so so", wd_mult = "x", __wd_mult__ = "x" }, op:list_attr()))
  end)

  case(F, "test_attr_dict", function()
    local data = S.Variable("data", { attr = { mood = "angry" } })
    local op = S.Convolution(data, { name = "conv", kernel = { 1, 1 }, num_filter = 1,
      attr = { __mood__ = "so so" }, lr_mult = 1 })
    assert.is_true(contain({
      data = { mood = "angry" },
      conv_weight = { __mood__ = "so so" },
      conv = { kernel = "(1, 1)", __mood__ = "so so", num_filter = "1", lr_mult = "1", __lr_mult__ = "1" },
      conv_bias = { __mood__ = "so so" } }, op:attr_dict()))
  end)
end)
