-- spec/mxnet_extras_spec.lua — MXNet 1.9's smaller functions (lua/mx/nd/mxnet_extra.lua,
-- lua/mx/nd/image.lua, Block:setattr, nd.contrib.ctc_loss): the values MXNet 1.9.1 gives
-- for the same calls (written in the comments), luamx's 1-based index values.
local mx = require("mx")
local nd = mx.nd

local function close(want, got, tol)
  local g = got:reshape(-1):tolist()
  assert.equal(#want, #g)
  for i = 1, #want do assert.is_true(math.abs(g[i] - want[i]) <= (tol or 1e-5), i .. ": " .. g[i]) end
end

describe("MXNet 1.9's smaller nd functions", function()
  local x = nd.array { { 1, 5, 2 }, { 7, 0, 3 } }

  it("shape_array, size_array: int64 arrays", function()
    -- MXNet: shape_array -> [2 3] (int64), size_array -> [6]
    local s, n = nd.shape_array(x), nd.size_array(x)
    assert.same({ 2, 3 }, s:tolist())
    assert.equal("int64", s:dtype())
    assert.same({ 6 }, n:tolist())
    assert.same({ 1 }, n:shape())
    assert.same({ 3 }, nd.shape_array { data = nd.zeros { 3 } }:tolist())
  end)

  it("argmax_channel: the argmax along the last axis, 1-based", function()
    -- MXNet: [1. 0.] (0-based)
    assert.same({ 2, 1 }, nd.argmax_channel(x):tolist())
  end)

  it("batch_take: a[i, indices[i]], 1-based, with pick's gradient", function()
    -- MXNet: batch_take(x, [2, 0]) -> [2. 7.]
    assert.same({ 2, 7 }, nd.batch_take(x, nd.array { 3, 1 }):tolist())
    local a = nd.array { { 1, 2 }, { 3, 4 } }
    a:attach_grad()
    mx.autograd.record(function() nd.batch_take(a, nd.array { 2, 1 }):sum():backward() end)
    assert.same({ { 0, 1 }, { 1, 0 } }, a:grad():totable())
    assert.has_error(function() nd.batch_take(x, nd.array { 1 }) end,
      "batch_take: a must be (N, M) and indices (N), got (2, 3) and (1)")
  end)

  it("linalg_sumlogdiag (nd.linalg.sumlogdiag): sum of log of the diagonals, gradient 1 / A_ii", function()
    -- MXNet: [3.583519 0.6931472]; one matrix -> shape (1,)
    local A = nd.array { { { 4, 1 }, { 1, 9 } }, { { 1, 0 }, { 0, 2 } } }
    close({ 3.583519, 0.6931472 }, nd.linalg_sumlogdiag(A))
    local one = nd.linalg.sumlogdiag(nd.array { { 4, 1 }, { 1, 9 } })
    assert.same({ 1 }, one:shape())
    A:attach_grad()
    mx.autograd.record(function() nd.linalg_sumlogdiag(A):sum():backward() end)
    close({ 0.25, 0, 0, 1 / 9, 1, 0, 0, 0.5 }, A:grad())
    assert.has_error(function() nd.linalg_sumlogdiag(nd.ones { 2, 3 }) end,
      "linalg_sumlogdiag: A must be square matrices (..., n, n), got (2, 3)")
  end)

  it("reset_arrays: zeros in place", function()
    local a, b = nd.ones { 2 }, nd.ones { 1, 3 }
    nd.reset_arrays(a, b, { num_arrays = 2 })
    assert.same({ 0, 0 }, a:tolist())
    assert.same({ { 0, 0, 0 } }, b:totable())
    assert.has_error(function() nd.reset_arrays(a, { num_arrays = 3 }) end,
      "reset_arrays: num_arrays is 3 but 1 arrays were given")
  end)

  it("nd.contrib.ctc_loss / CTCLoss are ctc_loss", function()
    assert.equal(nd.ctc_loss, nd.contrib.ctc_loss)
    assert.equal(nd.ctc_loss, nd.contrib.CTCLoss)
  end)
end)

describe("mx.nd.image", function()
  local img = nd.arange(0, 12):reshape { 2, 2, 3 }

  it("flip_left_right / flip_top_bottom on HWC and NHWC", function()
    -- MXNet: flip_left_right(arange(12).reshape(2, 2, 3)) ->
    -- [[[3,4,5],[0,1,2]],[[9,10,11],[6,7,8]]]
    assert.same({ { { 3, 4, 5 }, { 0, 1, 2 } }, { { 9, 10, 11 }, { 6, 7, 8 } } },
      nd.image.flip_left_right(img):totable())
    assert.same({ { { 6, 7, 8 }, { 9, 10, 11 } }, { { 0, 1, 2 }, { 3, 4, 5 } } },
      nd.image.flip_top_bottom(img):totable())
    local batch = nd.stack(img, img)
    assert.same(nd.image.flip_left_right(img):totable(), nd.image.flip_left_right(batch)[2]:totable())
  end)

  it("random flips give the image or its flip; random_brightness draws within its range", function()
    mx.random.seed(3)
    local flipped, kept = 0, 0
    for _ = 1, 20 do
      local r = nd.image.random_flip_left_right(img):totable()
      if r[1][1][1] == 3 then flipped = flipped + 1 elseif r[1][1][1] == 0 then kept = kept + 1 end
    end
    assert.equal(20, flipped + kept)
    assert.is_true(flipped > 0 and kept > 0)
    local u = nd.ones { 2, 2, 3 } * 10
    for _ = 1, 5 do
      local v = nd.image.random_brightness(u, 0.5, 1.5):tolist()[1]
      assert.is_true(v >= 5 and v <= 15)
    end
  end)

  it("to_tensor, normalize, resize, crop and adjust_lighting as the transforms", function()
    local u8 = nd.array({ { { 255, 0, 51 } } }, { dtype = "uint8" })
    close({ 1, 0, 0.2 }, nd.image.to_tensor(u8))
    close({ 1, -1, -0.6 }, nd.image.normalize(nd.image.to_tensor(u8), { 0.5, 0.5, 0.5 }, { 0.5, 0.5, 0.5 }),
      1e-6)
    assert.same({ 4, 6, 3 }, nd.image.resize(img, { 6, 4 }):shape())
    assert.same({ { { 3, 4, 5 } } }, nd.image.crop(img, 1, 0, 1, 1):totable())
    local l = nd.image.adjust_lighting(nd.zeros { 1, 1, 3 }, { 0.1, 0, 0 })
    assert.same(nd.adjust_lighting(nd.zeros { 1, 1, 3 }, { alpha_r = 0.1 }):tolist(), l:tolist())
    assert.has_error(function() nd.image.adjust_lighting(img, 0.1) end,
      "image.adjust_lighting: alpha must be a list of 3 numbers, got 0.1")
  end)
end)

describe("Block:setattr", function()
  it("sets the attribute on every parameter", function()
    local net = mx.gluon.nn.HybridSequential()
    net:add(mx.gluon.nn.Dense(2, { in_units = 3 }), mx.gluon.nn.Dense(1, { in_units = 2 }))
    net:setattr("grad_req", "null")
    net:setattr("lr_mult", 0.5)
    for _, p in net:collect_params():items() do
      assert.equal("null", p.grad_req)
      assert.equal(0.5, p.lr_mult)
    end
    assert.has_error(function() net:setattr("grad_req", "sometimes") end)
  end)
end)
