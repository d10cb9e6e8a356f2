-- MXNet 1.9.1's tests/python/unittest/test_infer_shape.py, ported (spec/upstream/README.md).
-- Axes and output indices are luamx's 1-based ones; the mx.np_shape() halves (unknown as
-- -1 / None) are left out: luamx reads and gives unknown dims as 0, MXNet 1.x's legacy form.
local mx = require("mx")
local S = mx.sym
local C = require("upstream.common")
local F = "test_infer_shape.py"
local case, skip, fails = C.cases(it, function(why) pending(why) end)

local function mlp2()
  local out = S.FullyConnected(S.Variable("data"), { name = "fc1", num_hidden = 1000 })
  out = S.Activation(out, { act_type = "relu" })
  return S.FullyConnected(out, { name = "fc2", num_hidden = 10 })
end
local function by_name(sym, shapes)
  local t = {}
  for i, n in ipairs(sym:list_arguments()) do t[n] = shapes[i] end
  return t
end

describe("MXNet 1.9.1 tests/python/unittest", function()
  case(F, "test_mlp2_infer_shape", function()
    local out = mlp2()
    local a, o = out:infer_shape { data = { 100, 100 } }
    assert.equal(1, #o)
    assert.same({ 100, 10 }, o[1])
    local d = by_name(out, a)
    assert.same({ 10 }, d.fc2_bias)
    assert.same({ 10, 1000 }, d.fc2_weight)
    assert.same({ 1000 }, d.fc1_bias)
    assert.same({ 1000, 100 }, d.fc1_weight)
  end)

  case(F, "test_mlp2_infer_error", function()
    C.raises(nil, function() mlp2():infer_shape { data = { 100, 100 }, fc1_weight = { 1, 100 } } end)
  end)

  skip(F, "test_backward_infer", "needs _identity_with_attr_like_rhs (an internal op luamx does not have)")

  case(F, "test_incomplete_infer_elewise", function()
    local a = S.Variable("a", { shape = { 0, 10 } })
    local b = S.Variable("b", { shape = { 12, 0 } })
    local c = a + b
    local d = by_name(c, (c:infer_shape()))
    assert.same({ 12, 10 }, d.a)
    assert.same({ 12, 10 }, d.b)
  end)

  case(F, "test_incomplete_infer_mlp", function()
    local a = S.Variable("a", { shape = { 0, 10 } })
    local b = S.FullyConnected(a, { num_hidden = 21 })
    local c = S.Variable("c", { shape = { 5, 0 } })
    local d = b + c
    local r = by_name(d, (d:infer_shape()))
    assert.same({ 5, 10 }, r.a)
    assert.same({ 5, 21 }, r.c)
  end)

  case(F, "test_incomplete_infer_slicechannel", function()
    local a = S.Variable("a", { shape = { 0, 10 } })
    local b = S.SliceChannel(a, { num_outputs = 10, axis = 2, squeeze_axis = true })
    local c = S.Variable("c", { shape = { 5 } })
    local d = b[2] + c
    assert.same({ 5, 10 }, by_name(d, (d:infer_shape())).a)
    a = S.Variable("a", { shape = { 0, 15, 0 } })
    b = S.SliceChannel(a, { num_outputs = 3, squeeze_axis = false })
    c = S.Variable("c", { shape = { 3, 5, 2 } })
    d = b[2] + c
    assert.same({ 3, 15, 2 }, by_name(d, (d:infer_shape())).a)
  end)

  case(F, "test_incomplete_infer_convolution", function()
    local a = S.Variable("a", { shape = { 0, 10, 0, 0 } })
    local b = S.Convolution(a, { num_filter = 21, kernel = { 3, 3 }, dilate = { 1, 1 }, pad = { 1, 1 } })
    local c = S.Variable("c", { shape = { 5, 21, 32, 32 } })
    local d = b + c
    assert.same({ 5, 10, 32, 32 }, by_name(d, (d:infer_shape())).a)
  end)

  case(F, "test_incomplete_infer_concat", function()
    local a = S.Variable("a", { shape = { 0, 10 } })
    local b = S.Variable("b", { shape = { 0, 5 } })
    local c = S.Concat(a, b, { num_args = 2, dim = 2 })
    local d = S.Variable("d", { shape = { 2, 0 } })
    d = d + c
    local r = by_name(d, (d:infer_shape()))
    assert.same({ 2, 10 }, r.a)
    assert.same({ 2, 5 }, r.b)
    assert.same({ 2, 15 }, r.d)
  end)

  case(F, "test_fc_infer_type", function()
    local out = S.FullyConnected(S.Variable("data"), { name = "fc1", num_hidden = 1000 })
    local a, o = out:infer_type { data = "float32" }
    assert.equal(1, #o)
    assert.equal("float32", o[1])
    local d = by_name(out, a)
    assert.equal("float32", d.fc1_bias)
    assert.equal("float32", d.fc1_weight)
  end)

  case(F, "test_shape_completely_unknown", function()
    local a, o = S.sin(S.var("data")):infer_shape_partial()
    assert.same({}, a[1])
    assert.same({}, o[1])
  end)

  case(F, "test_dot_partial_shape", function()
    local _, r = S.dot(S.Variable("x"), S.Variable("y")):infer_shape_partial { x = { 0, 3, 4 }, y = { 4, 5 } }
    assert.same({ { 0, 3, 5 } }, r)
  end)

  case(F, "test_batch_dot_partial_shape", function()
    local z = S.batch_dot(S.Variable("x"), S.Variable("y"))
    local _, r = z:infer_shape_partial { x = { 0, 3, 4 }, y = { 0, 4, 5 } }
    assert.same({ { 0, 3, 5 } }, r)
    _, r = z:infer_shape_partial { x = { 0, 3, 4 }, y = { 0, 0, 5 } }
    assert.same({ {} }, r)
  end)

  case(F, "test_embedding_partial_shape", function()
    local y = S.Embedding(S.Variable("x"), S.Variable("w"), { input_dim = 100, output_dim = 10 })
    local _, r = y:infer_shape_partial { x = { 0, 5 }, w = { 100, 10 } }
    assert.same({ { 0, 5, 10 } }, r)
  end)

  case(F, "test_transpose_partial_shape", function()
    local y = S.transpose(S.Variable("x"), { axes = { 1, 4, 3, 2 } })
    local _, r = y:infer_shape_partial { x = { 0, 3, 224, 224 } }
    assert.same({ { 0, 224, 224, 3 } }, r)
  end)

  case(F, "test_pick_partial_shape", function()
    local y = S.pick(S.Variable("x"), S.Variable("index"), { axis = 2 })
    local _, r = y:infer_shape_partial { x = { 0, 3, 3 }, index = { 0, 3 } }
    assert.same({ { 0, 3 } }, r)
  end)

  fails(F, "test_where_partial_shape", "luamx's where infers (0, 2) from x and y where MXNet leaves "
    .. "the output unknown until cond is known")
end)
