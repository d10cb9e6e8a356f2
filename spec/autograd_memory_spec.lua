-- mx.autograd's memory: what a dropped graph and backward release (handles, tape nodes,
-- the temporaries backward makes), and the gradients fully_connected's formula writes
-- straight into the variables' buffers.
local mx = require("mx")
local ag = mx.autograd
local nd = mx.nd

local function f64(t) return nd.array(t, { dtype = "float64" }) end

local close = require("helpers.close").within(1e-9)

describe("autograd memory", function()
  -- a dropped graph goes in two GC cycles (its entries, then the nodes' own boxes);
  -- nd releases the handles of collected boxes at its next sweep
  local function settle()
    for _ = 1, 3 do collectgarbage() end
    if nd._sweep then nd._sweep() end
  end
  it("10k record/backward iterations keep memory flat", function()
    local x = nd.array { { 1, 2, 3 }, { 4, 5, 6 } }
    local w = nd.array { 0.5, -1, 2 }
    x:attach_grad()
    w:attach_grad()
    local function step()
      local y = ag.record(function() return nd.tanh(x * w + 1) * x end)
      y:backward()
    end
    local function entries()
      local n = 0
      for _ in pairs(ag._entry) do n = n + 1 end
      return n
    end
    for _ = 1, 2000 do step() end
    settle()
    local c0, l0, e0 = mx.memory_stats().bytes_in_use, collectgarbage("count"), entries()
    for _ = 1, 10000 do step() end
    settle()
    local c1, l1, e1 = mx.memory_stats().bytes_in_use, collectgarbage("count"), entries()
    assert.is_true(c1 <= c0 + 4096, "C memory grew from " .. c0 .. " to " .. c1)
    assert.are.equal(e0, e1) -- no graph left behind
    -- the Lua heap also holds the JIT's traces, which grow a little as it compiles
    -- side traces; a leaked node per iteration would be > 2 MB here
    assert.is_true(l1 < l0 + 1024, "Lua heap grew from " .. l0 .. " KB to " .. l1 .. " KB")
  end)

  it("a graph that is never backwarded is freed with its outputs", function()
    local x = nd.ones { 256, 256 }
    x:attach_grad()
    settle()
    local c0 = mx.memory_stats().bytes_in_use
    for _ = 1, 50 do
      ag.record(function() return nd.exp(x * 2) end)
    end
    settle()
    local c1 = mx.memory_stats().bytes_in_use
    -- 50 kept graphs would hold 50 * 2 * 256 KB; allow the last one (a stale stack
    -- slot may still reference it)
    assert.is_true(c1 <= c0 + 2 * 262144 + 4096, "C memory grew from " .. c0 .. " to " .. c1)
    local live = 0
    for _ in pairs(ag._nodes) do live = live + 1 end
    assert.is_true(live <= 2, live .. " nodes still alive")
  end)

  it("so is a dropped graph through a custom Function that saved its output", function()
    local Exp = ag.Function:extend()
    function Exp.forward(self, a)
      local y = nd.exp(a)
      self:save_for_backward(y)
      return y
    end
    function Exp.backward(self, dy) return dy * self.saved_tensors[1] end
    local x = nd.ones { 256, 256 }
    x:attach_grad()
    settle()
    local c0 = mx.memory_stats().bytes_in_use
    for _ = 1, 50 do
      ag.record(function() return Exp()(x * 2) * 3 end)
    end
    settle()
    local c1 = mx.memory_stats().bytes_in_use
    assert.is_true(c1 <= c0 + 3 * 262144 + 4096, "C memory grew from " .. c0 .. " to " .. c1)
    -- and it still differentiates
    local y = ag.record(function() return Exp()(x * 2) end)
    y:backward()
    close(x:grad():reshape(-1)[{ { 1, 3 } }], { 2 * math.exp(2), 2 * math.exp(2),
      2 * math.exp(2) }, 1e-5)
  end)

  it("backward releases its own temporaries when it ends, without a GC cycle", function()
    local x = nd.ones { 256, 256 }
    local w = nd.ones { 256, 256 } * 0.01
    w:attach_grad()
    local y = ag.record(function() return nd.tanh(nd.dot(nd.exp(x * w), w)):sum() end)
    settle()
    local before = mx.memory_stats().bytes_in_use
    collectgarbage("stop") -- nothing is collected from here on
    y:backward()
    nd.waitall()
    local after = mx.memory_stats().bytes_in_use
    collectgarbage("restart")
    -- the gradient formulas made ~10 tensors of 256 KB; what remains is the tape's
    -- own inputs and outputs, already counted before (and no growth)
    assert.is_true(after <= before + 4096, "backward left " .. (after - before) .. " bytes")
    assert.is_true(w:grad():sum():item() ~= 0)
  end)

  it("results of autograd.grad and what a custom Function keeps survive the release", function()
    local x = nd.array { 1, 2, 3 }
    x:attach_grad()
    local kept
    local Twice = ag.Function:extend()
    function Twice.forward(_, a) return a * 2 end
    function Twice.backward(_, dy)
      kept = dy * 10 -- user code keeps a tensor made in backward
      return dy * 2
    end
    local y = ag.record(function() return (Twice()(x) * x):sum() end)
    local g = ag.grad(y, { x }, { retain_graph = true })[1]
    local h = ag.grad(y, { x })[1]
    collectgarbage()
    close(g, { 4, 8, 12 }, 1e-12) -- d/dx 2x^2 = 4x
    close(h, { 4, 8, 12 }, 1e-12)
    close(kept, { 10, 20, 30 }, 1e-12) -- dy = x
    local z = ag.record(function() return (x * x * x):sum() end)
    z:backward()
    close(x:grad(), { 3, 12, 27 }, 1e-12)
  end)

  it("the release survives a compaction of the handle registry during backward", function()
    -- a sweep inside backward (forced here from a custom Function) that finds the
    -- registry mostly free compacts it: slots are renumbered and the handle array
    -- shrinks below the slots backward noted before it
    local Sweep = ag.Function:extend()
    function Sweep.forward(_, a) return a * 1 end
    function Sweep.backward(_, dy)
      for i = 1, 40000 do nd.full({ 1 }, i) end -- a burst of garbage
      collectgarbage()
      collectgarbage()
      nd._sweep() -- 40000 dead slots of ~40000: compacts
      return dy
    end
    local x = nd.array { 1, 2, 3 }
    x:attach_grad()
    for _ = 1, 3 do
      local y = ag.record(function()
        local h = x
        for _ = 1, 50 do h = h * 1.01 end -- born before the compaction
        h = Sweep()(h)
        for _ = 1, 50 do h = h * 1.01 end
        return (h * h):sum()
      end)
      y:backward()
      local f = 1.01 ^ 200
      close(x:grad(), { 2 * f, 4 * f, 6 * f }, 1e-3) -- (float32 products)
    end
    local keep = {}
    for i = 1, 5000 do keep[i] = nd.full({ 2 }, i) end -- the registry still works
    settle()
    for i = 1, 5000, 999 do assert.are.equal(i, keep[i][2]:item()) end
  end)
end)

-- fully_connected's formula writes a variable's gradient straight into its buffer when
-- it is the variable's only gradient (`into`, spared copy); these pin down that nothing
-- can tell the difference
describe("autograd gradients written into the buffers", function()
  local function fc_case()
    local x = f64 { { 1, -2, 0.5, 3 }, { 0.25, 1, -1, 2 }, { -3, 0.5, 2, 1 } }
    local w = f64 { { 0.5, -1, 2, 0.1 }, { 1, 0.3, -0.2, 0.7 }, { -0.4, 0.9, 0.6, -1.5 } }
    local b = f64 { 0.1, -0.2, 0.3 }
    local hw = f64 { { 1, 2, 3 }, { -1, 0.5, 2 }, { 0.3, -2, 1 } } -- loss weights
    return x, w, b, hw
  end
  local function expected(x, hw) -- d sum(fc(x) * hw) / dw, / db
    return nd.dot(hw, x, { transpose_a = true }):reshape(-1):tolist(), nd.sum(hw, { axis = 1 }):tolist()
  end

  it("keeps the buffer identity, its views and the values of every backward", function()
    local x, w, b, hw = fc_case()
    w:attach_grad()
    b:attach_grad()
    local gw, gb = w:grad(), b:grad()
    local view = gw:reshape(-1) -- a view held across backwards sees each result
    for k = 1, 2 do
      local s = k == 1 and hw or hw * 2
      local y = ag.record(function()
        return nd.sum(nd.fully_connected(x, w, b, { num_hidden = 3 }) * s)
      end)
      y:backward()
      assert.are.equal(gw, w:grad())
      assert.are.equal(gb, b:grad())
      local ew, eb = expected(x, s)
      close(view, ew)
      close(gb, eb)
    end
  end)

  it("a variable used twice still sums both uses", function()
    local x, w, b, hw = fc_case()
    w:attach_grad()
    b:attach_grad()
    local y = ag.record(function()
      local o = nd.fully_connected(x, w, b, { num_hidden = 3 })
      return nd.sum(o * hw) + nd.sum(w * 3)
    end)
    y:backward()
    local ew = expected(x, hw)
    for i = 1, #ew do ew[i] = ew[i] + 3 end
    close(w:grad():reshape(-1), ew)
  end)

  it("a buffer that the graph reads keeps its old value until every formula ran", function()
    local x, w, b, hw = fc_case()
    w:attach_grad()
    b:attach_grad()
    x:attach_grad()
    local old = f64 { { 2, 1, 0, -1 }, { 0.5, 0.5, 3, 1 }, { -2, 1, 1, 4 } }
    old:copyto(w:grad()) -- w's previous gradient, read below as a constant
    local y = ag.record(function()
      local h = x * w:grad() -- recorded before the fc: its formula runs after the fc's
      return nd.sum(nd.fully_connected(h, w, b, { num_hidden = 3 }) * hw)
    end)
    y:backward()
    local dh = nd.dot(hw, w) -- d loss / d h
    close(x:grad():reshape(-1), (dh * old):reshape(-1))
    local ew = expected(x * old, hw)
    close(w:grad():reshape(-1), ew)
  end)
end)
