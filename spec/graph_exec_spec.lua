-- The graph executor (core/src/graph_exec.c) and the memory plan (graph_plan.c),
-- driven through the C API: values equal eager mode's, one engine op per run, planned
-- buffers shared by liveness and in place, in-place auxiliary updates, clear errors.
local mx = require("mx")
local lib = require("mx.core.lib")
local ffi, C = lib.ffi, lib.C
local nd = mx.nd

local function last_error() return ffi.string(C.mx_last_error()) end
local function ints(t) return ffi.new("int[?]", math.max(#t, 1), t) end

local function graph() return ffi.gc(C.mx_graph_new(), C.mx_graph_free) end

local function op(g, name, opname, inputs, attrs)
  local keys, vals = {}, {}
  for k, v in pairs(attrs or {}) do keys[#keys + 1] = k; vals[#vals + 1] = tostring(v) end
  local nodes, outs = {}, {}
  for i, x in ipairs(inputs) do
    if type(x) == "table" then nodes[i], outs[i] = x[1], x[2] else nodes[i], outs[i] = x, 0 end
  end
  local id = C.mx_graph_add_op_attrs(g, C.mx_op_find(opname), name, #keys,
    ffi.new("const char*[?]", math.max(#keys, 1), keys), ffi.new("const char*[?]", math.max(#vals, 1), vals),
    #inputs, ints(nodes), ints(outs))
  assert(id >= 0, last_error())
  return id
end

local function heads(g, list)
  assert(C.mx_graph_set_heads(g, #list, ints(list), ints((function()
    local z = {}
    for i = 1, #list do z[i] = 0 end
    return z
  end)())) == 0, last_error())
end

local function desc_of(x)
  local d = ffi.new("mx_desc")
  local s = x:shape()
  d.ndim = #s
  for i = 1, #s do d.shape[i - 1] = s[i] end
  d.dtype = nd.dtype_code(x:dtype())
  d.dev_type = 1
  return d
end

local function compile(g, inputs, flags)
  local n = #inputs
  local ds = ffi.new("mx_desc[?]", math.max(n, 1))
  for i = 1, n do ds[i - 1] = desc_of(inputs[i]) end
  local pe = ffi.new("mx_graph_exec*[1]")
  local rc = C.mx_graph_exec_new(g, n, ds, flags or 0, pe)
  if rc ~= 0 then return nil, last_error() end
  return ffi.gc(pe[0], C.mx_graph_exec_free)
end

local function run(e, inputs, nout)
  local ins = ffi.new("mx_tensor*[?]", math.max(#inputs, 1))
  for i = 1, #inputs do ins[i - 1] = inputs[i].h end
  local outs = ffi.new("mx_tensor*[?]", nout)
  local rc = C.mx_graph_exec_run(e, #inputs, ins, nout, outs)
  if rc ~= 0 then return nil, last_error() end
  local r = {}
  for k = 1, nout do r[k] = nd._wrap(outs[k - 1]) end
  return r
end

local function mlp()
  local g = graph()
  local x = C.mx_graph_add_var(g, "data")
  local w1 = C.mx_graph_add_var(g, "fc1_weight")
  local b1 = C.mx_graph_add_var(g, "fc1_bias")
  local fc1 = op(g, "fc1", "FullyConnected", { x, w1, b1 }, { num_hidden = 16 })
  local r = op(g, "relu1", "relu", { fc1 })
  local w2 = C.mx_graph_add_var(g, "fc2_weight")
  local b2 = C.mx_graph_add_var(g, "fc2_bias")
  local fc2 = op(g, "fc2", "FullyConnected", { r, w2, b2 }, { num_hidden = 3 })
  heads(g, { fc2 })
  return g
end

describe("graph executor", function()
  it("runs an MLP to eager mode's values, static_alloc or not", function()
    mx.random.seed(1)
    local x, w1 = nd.random.normal(0, 1, { 4, 7 }), nd.random.normal(0, 1, { 16, 7 })
    local b1 = nd.random.normal(0, 1, { 16 })
    local w2, b2 = nd.random.normal(0, 1, { 3, 16 }), nd.random.normal(0, 1, { 3 })
    local want = nd.fully_connected(nd.relu(nd.fully_connected(x, w1, b1, { num_hidden = 16 })), w2, b2,
      { num_hidden = 3 }):totable()
    for _, flags in ipairs({ 0, C.MX_GRAPH_STATIC_ALLOC }) do
      local e = assert(compile(mlp(), { x, w1, b1, w2, b2 }, flags))
      for _ = 1, 2 do
        local out = assert(run(e, { x, w1, b1, w2, b2 }, 1))
        assert.same({ 4, 3 }, out[1]:shape())
        local got = out[1]:totable()
        for i = 1, 4 do for j = 1, 3 do assert.near(want[i][j], got[i][j], 1e-5) end end
      end
      assert.equal(1, C.mx_graph_exec_num_buffers(e)) -- fc1's output, then relu in place
    end
  end)

  it("plans a chain of unary ops into one buffer (in place) and a diamond into two", function()
    local g = graph()
    local x = C.mx_graph_add_var(g, "x")
    local a = op(g, "a", "exp", { x })
    local b = op(g, "b", "sigmoid", { a })
    local c = op(g, "c", "tanh", { b })
    local d = op(g, "d", "relu", { c })
    heads(g, { d })
    local e = assert(compile(g, { nd.ones({ 256 }) }))
    assert.equal(1, C.mx_graph_exec_num_buffers(e))
    assert.equal(1024, tonumber(C.mx_graph_exec_planned_bytes(e)))
    -- diamond: p = exp(x); q = sin(p); r = cos(p); s = q + r: q cannot take p's buffer
    -- (r still reads p)
    g = graph()
    x = C.mx_graph_add_var(g, "x")
    local p = op(g, "p", "exp", { x })
    local q = op(g, "q", "sin", { p })
    local r = op(g, "r", "cos", { p })
    local s = op(g, "s", "elemwise_add", { q, r })
    local t = op(g, "t", "negative", { s })
    heads(g, { t })
    local xv = nd.array({ 0.1, 0.2, 0.3 })
    e = assert(compile(g, { xv }))
    -- r takes p's buffer (p dies there), s takes q's, t takes s's
    assert.equal(2, C.mx_graph_exec_num_buffers(e))
    local out = assert(run(e, { xv }, 1))[1]:totable()
    for i, v in ipairs({ 0.1, 0.2, 0.3 }) do
      assert.near(-(math.sin(math.exp(v)) + math.cos(math.exp(v))), out[i], 1e-6)
    end
  end)

  it("runs as one engine op", function()
    local g = graph()
    local x = C.mx_graph_add_var(g, "x")
    local prev = x
    for i = 1, 20 do prev = op(g, "n" .. i, i % 2 == 0 and "sin" or "cos", { prev }) end
    heads(g, { prev })
    local xv = nd.ones({ 64 })
    local e = assert(compile(g, { xv }))
    nd.waitall()
    local imax = mx.engine.get_inline_max()
    mx.engine.set_inline_max(0) -- queue every op pushed from here
    local before = mx.engine.stats()
    local out = assert(run(e, { xv }, 1))
    out[1]:wait_to_read()
    local after = mx.engine.stats()
    mx.engine.set_inline_max(imax)
    -- one queued op (the graph); its 20 nodes run inside it
    assert.equal(1, after.ops_queued - before.ops_queued)
    local want = 1
    for i = 1, 20 do want = i % 2 == 0 and math.sin(want) or math.cos(want) end
    assert.near(want, out[1]:totable()[1], 1e-5)
  end)

  it("updates BatchNorm's moving statistics in place (auxiliary inputs)", function()
    local g = graph()
    local x = C.mx_graph_add_var(g, "data")
    local gamma = C.mx_graph_add_var(g, "bn_gamma")
    local beta = C.mx_graph_add_var(g, "bn_beta")
    local mm = C.mx_graph_add_var(g, "bn_moving_mean")
    local mv = C.mx_graph_add_var(g, "bn_moving_var")
    local bn = op(g, "bn", "BatchNorm", { x, gamma, beta, mm, mv }, { fix_gamma = "False" })
    heads(g, { bn })
    mx.random.seed(2)
    local xv = nd.random.normal(3, 1, { 8, 2 })
    local ins = { xv, nd.ones({ 2 }), nd.zeros({ 2 }), nd.zeros({ 2 }), nd.ones({ 2 }) }
    local e, err = compile(g, ins, C.MX_GRAPH_TRAINING)
    assert(e, err)
    assert(run(e, ins, 1))
    local mean = ins[4]:totable()
    assert.is_true(mean[1] > 0.1 and mean[2] > 0.1) -- momentum 0.9 toward ~3
  end)

  -- a residual read for the last time by convolution_sum / quantized_conv's sum: the output
  -- takes its buffer (the sum post-op adds it where it lies) instead of a second one
  local function conv_chain(with_sum)
    local g = graph()
    local x, w1, w2, w3 = C.mx_graph_add_var(g, "x"), C.mx_graph_add_var(g, "w1"),
      C.mx_graph_add_var(g, "w2"), C.mx_graph_add_var(g, "w3")
    local a = op(g, "a", "convolution", { x, w1 }, { kernel = "(3,3)", pad = "(1,1)", num_filter = 16,
      no_bias = "True" })
    local b = a
    if with_sum then
      b = op(g, "b", "convolution_sum", { x, w2, a }, { kernel = "(3,3)", pad = "(1,1)",
        num_filter = 16, no_bias = "True", act_type = "relu" })
    end
    heads(g, { op(g, "c", "convolution", { b, w3 }, { kernel = "(1,1)", num_filter = 8,
      no_bias = "True" }) })
    return g
  end

  it("runs convolution_sum over its residual's buffer when that is the residual's last use", function()
    mx.random.seed(4)
    local x = nd.random.normal(0, 1, { 2, 16, 12, 12 })
    local w1, w2 = nd.random.normal(0, 0.1, { 16, 16, 3, 3 }), nd.random.normal(0, 0.1, { 16, 16, 3, 3 })
    local w3 = nd.random.normal(0, 0.1, { 8, 16, 1, 1 })
    local ins = { x, w1, w2, w3 }
    local e0 = assert(compile(conv_chain(false), ins))
    local e = assert(compile(conv_chain(true), ins))
    local cv = { kernel = { 3, 3 }, pad = { 1, 1 }, num_filter = 16, no_bias = true }
    local a = nd.convolution(x, w1, cv)
    local b = nd.relu(nd.convolution(x, w2, cv) + a)
    local want = nd.convolution(b, w3, { kernel = { 1, 1 }, num_filter = 8, no_bias = true })
    for _ = 1, 2 do
      local got = assert(run(e, ins, 1))[1]
      assert.is_true(nd.max(nd.abs(got - want)):asscalar() < 1e-4)
    end
    -- the same buffers as the chain without the sum: b lives in a's
    assert.equal(C.mx_graph_exec_num_buffers(e0), C.mx_graph_exec_num_buffers(e))
    assert.equal(tonumber(C.mx_graph_exec_planned_bytes(e0)), tonumber(C.mx_graph_exec_planned_bytes(e)))
  end)

  it("runs quantized_conv's sum over the residual's buffer (with and without a bias)", function()
    mx.random.seed(5)
    local N, Cn, H = 2, 16, 10
    local x = nd.random.uniform(0, 1, { N, Cn, H, H })
    local w1 = nd.cast(nd.round(nd.random.uniform(-60, 60, { Cn, Cn, 3, 3 })), { dtype = "int8" })
    local w2 = nd.cast(nd.round(nd.random.uniform(-60, 60, { Cn, Cn, 3, 3 })), { dtype = "int8" })
    local ws, bias = nd.ones({ Cn }) * 0.01, nd.random.normal(0, 0.1, { Cn })
    local conv = { kernel = "(3,3)", pad = "(1,1)", num_filter = Cn, out_type = "uint8",
      min_calib_range = 0, max_calib_range = 4 }
    for _, no_bias in ipairs({ false, true }) do
      local function chain(with_sum)
        local g = graph()
        local xv, v1, v2, vs = C.mx_graph_add_var(g, "x"), C.mx_graph_add_var(g, "w1"),
          C.mx_graph_add_var(g, "w2"), C.mx_graph_add_var(g, "ws")
        local vb = C.mx_graph_add_var(g, "bias")
        local q = op(g, "q", "quantize_v2", { xv }, { out_type = "uint8", min_calib_range = 0,
          max_calib_range = 1 })
        local qin = { q, { q, 1 }, { q, 2 } }
        local function qconv(name, w, extra, attrs)
          local ins = { qin[1], qin[2], qin[3], w, vs }
          if not no_bias then ins[#ins + 1] = vb end
          for _, v in ipairs(extra or {}) do ins[#ins + 1] = v end
          local at = { no_bias = no_bias and "True" or "False", act_type = "relu" }
          for k, v in pairs(conv) do at[k] = v end
          for k, v in pairs(attrs or {}) do at[k] = v end
          return op(g, name, "quantized_conv", ins, at)
        end
        local a = qconv("a", v1)
        local b = with_sum and qconv("b", v2, { a, { a, 1 }, { a, 2 } },
          { with_sum = "True", postsum_act = "relu", max_calib_range = 8 }) or a
        heads(g, { op(g, "d", "dequantize", { b, { b, 1 }, { b, 2 } }) })
        return g
      end
      local ins = { x, w1, w2, ws, bias }
      local e0 = assert(compile(chain(false), ins))
      local e = assert(compile(chain(true), ins))
      local xq, xmin, xmax = nd.quantize_v2(x, { out_type = "uint8", min_calib_range = 0,
        max_calib_range = 1 })
      local o = { kernel = { 3, 3 }, pad = { 1, 1 }, num_filter = Cn, out_type = "uint8",
        min_calib_range = 0, max_calib_range = 4, no_bias = no_bias, act_type = "relu" }
      local bb = not no_bias and bias or nil
      local function eager_qconv(w, ...)
        if bb then return nd.quantized_conv(xq, xmin, xmax, w, ws, bb, ...) end
        return nd.quantized_conv(xq, xmin, xmax, w, ws, ...)
      end
      local a, amin, amax = eager_qconv(w1, o)
      o.with_sum, o.postsum_act, o.max_calib_range = true, "relu", 8
      local want = nd.dequantize(eager_qconv(w2, a, amin, amax, o))
      local got = assert(run(e, ins, 1))[1]
      assert.is_true(nd.max(nd.abs(got - want)):asscalar() <= 8 / 255 + 1e-6)
      -- no second output-sized buffer: b takes a's (only b's two range scalars are new)
      local abytes = N * Cn * H * H
      assert.is_true(tonumber(C.mx_graph_exec_planned_bytes(e)) <
        tonumber(C.mx_graph_exec_planned_bytes(e0)) + abytes / 2)
    end
  end)

  -- concats planned in place: the parts' producers write into the concat's output
  local function max_err(got, want)
    return nd.max(nd.abs(got - want)):asscalar()
  end

  it("writes a chain of concats' parts into one buffer, alive until any part's last read", function()
    -- x1 = sin x, x2 = cos x1, c1 = [x1 x2], x3 = tanh c1, c2 = [c1 x3], u = exp c2,
    -- v = -u, w = -x1 (x1 read after c2's last read: u must not take c2's buffer)
    local g = graph()
    local x = C.mx_graph_add_var(g, "x")
    local x1 = op(g, "x1", "sin", { x })
    local x2 = op(g, "x2", "cos", { x1 })
    local c1 = op(g, "c1", "concat", { x1, x2 }, { dim = 1 })
    local x3 = op(g, "x3", "tanh", { c1 })
    local c2 = op(g, "c2", "concat", { c1, x3 }, { dim = 1 })
    local u = op(g, "u", "exp", { c2 })
    heads(g, { op(g, "v", "negative", { u }), op(g, "w", "negative", { x1 }) })
    mx.random.seed(6)
    for _, n in ipairs({ 1, 2 }) do
      local xv = nd.random.normal(0, 1, { n, 4, 4, 4 })
      local e1 = nd.sin(xv)
      local ec1 = nd.concat({ e1, nd.cos(e1) }, { dim = 2 })
      local ec2 = nd.concat({ ec1, nd.tanh(ec1) }, { dim = 2 })
      local e = assert(compile(g, { xv }))
      for _ = 1, 2 do
        local out = assert(run(e, { xv }, 2))
        assert.same({ n, 16, 4, 4 }, out[1]:shape())
        assert.is_true(max_err(out[1], -nd.exp(ec2)) < 1e-5)
        assert.is_true(max_err(out[2], -e1) < 1e-6)
      end
      if n == 1 then
        -- row-major parts of a batch of 1: c2's buffer holds x1, x2, c1 and x3; u its own
        assert.equal(2, C.mx_graph_exec_num_buffers(e))
        assert.equal(2 * 16 * 16 * 4, tonumber(C.mx_graph_exec_planned_bytes(e)))
      else
        assert.is_true(C.mx_graph_exec_num_buffers(e) > 2) -- strided parts: copied
      end
    end
  end)

  it("copies a concat whose parts cannot be written in place, and keeps parts from in-place ops", function()
    local g = graph()
    local x = C.mx_graph_add_var(g, "x")
    local x1 = op(g, "x1", "sin", { x })
    local x2 = op(g, "x2", "cos", { x })
    local twice = op(g, "twice", "concat", { x1, x1 }, { dim = 1 }) -- one part read twice
    local with_var = op(g, "with_var", "concat", { x, x2 }, { dim = 1 }) -- a graph input
    local c = op(g, "c", "concat", { x1, x2 }, { dim = 1 })
    -- relu x1 is x1's last read: in place it would write over c's first half
    local r = op(g, "r", "relu", { x1 })
    local h = op(g, "h", "exp", { c })
    heads(g, { h, op(g, "r2", "negative", { r }), op(g, "t", "negative", { twice }),
      op(g, "wv", "negative", { with_var }) })
    mx.random.seed(7)
    local xv = nd.random.normal(0, 1, { 1, 4, 4, 4 })
    local s, co = nd.sin(xv), nd.cos(xv)
    local e = assert(compile(g, { xv }))
    local out = assert(run(e, { xv }, 4))
    assert.is_true(max_err(out[1], nd.exp(nd.concat({ s, co }, { dim = 2 }))) < 1e-5)
    assert.is_true(max_err(out[2], -nd.relu(s)) < 1e-6)
    assert.is_true(max_err(out[3], -nd.concat({ s, s }, { dim = 2 })) < 1e-6)
    assert.is_true(max_err(out[4], -nd.concat({ xv, co }, { dim = 2 })) < 1e-6)
  end)

  it("writes convolutions' blocked outputs into their concat (a dense block at batch 1)", function()
    -- a = conv x, b = conv a, c1 = [a b], d = conv c1, c2 = [c1 d], y = conv c2
    local function dense()
      local g = graph()
      local x = C.mx_graph_add_var(g, "x")
      local w = {}
      for i = 1, 4 do w[i] = C.mx_graph_add_var(g, "w" .. i) end
      local cv = { kernel = "(3,3)", pad = "(1,1)", num_filter = 16, no_bias = "True" }
      local a = op(g, "a", "convolution", { x, w[1] }, cv)
      local b = op(g, "b", "convolution", { a, w[2] }, cv)
      local c1 = op(g, "c1", "concat", { a, b }, { dim = 1 })
      local d = op(g, "d", "convolution", { c1, w[3] }, cv)
      local c2 = op(g, "c2", "concat", { c1, d }, { dim = 1 })
      heads(g, { op(g, "y", "convolution", { c2, w[4] }, { kernel = "(1,1)", num_filter = 16,
        no_bias = "True" }) })
      return g
    end
    mx.random.seed(8)
    for _, n in ipairs({ 1, 3 }) do
      local xv = nd.random.normal(0, 1, { n, 16, 10, 10 })
      local ws = { nd.random.normal(0, 0.1, { 16, 16, 3, 3 }), nd.random.normal(0, 0.1, { 16, 16, 3, 3 }),
        nd.random.normal(0, 0.1, { 16, 32, 3, 3 }), nd.random.normal(0, 0.1, { 16, 48, 1, 1 }) }
      local cv = { kernel = { 3, 3 }, pad = { 1, 1 }, num_filter = 16, no_bias = true }
      local a = nd.convolution(xv, ws[1], cv)
      local c1 = nd.concat({ a, nd.convolution(a, ws[2], cv) }, { dim = 2 })
      local c2 = nd.concat({ c1, nd.convolution(c1, ws[3], cv) }, { dim = 2 })
      local want = nd.convolution(c2, ws[4], { kernel = { 1, 1 }, num_filter = 16, no_bias = true })
      local ins = { xv, ws[1], ws[2], ws[3], ws[4] }
      local e = assert(compile(dense(), ins))
      for _ = 1, 2 do
        local got = assert(run(e, ins, 1))[1]
        assert.is_true(max_err(got, want) < 1e-4)
      end
      if n == 1 then
        -- blocked parts (nChw16c asked for, as the graph concatenates channels; nChw8c
        -- under AVX2), whole blocks of the output: c2's buffer holds a, b, c1 and d
        assert.equal(1, C.mx_graph_exec_num_buffers(e))
        assert.equal(48 * 10 * 10 * 4, tonumber(C.mx_graph_exec_planned_bytes(e)))
      end
    end
  end)

  it("writes the dense block's parts in place with oneDNN held to AVX2 (nChw8c; a child run)", function()
    -- AVX2's convolutions pick nChw8c themselves (on AVX-512 the graph asks for nChw16c
    -- over their channel-last pick). The ISA is fixed at oneDNN's first use.
    if os.getenv("ONEDNN_MAX_CPU_ISA") then return end
    local h = io.popen("ONEDNN_MAX_CPU_ISA=AVX2 busted --lua=luajit -o TAP --filter=dense.block.at.batch.1 "
      .. "spec/graph_exec_spec.lua 2>&1; echo \"exit $?\"")
    local out = h:read("*a")
    h:close()
    assert.matches("\nok 1 ", out)
    assert.matches("exit 0", out)
  end)

  it("rejects inputs of another signature, naming the input and both shapes", function()
    local params = { nd.ones({ 16, 7 }), nd.ones({ 16 }), nd.ones({ 3, 16 }), nd.ones({ 3 }) }
    local e = assert(compile(mlp(), { nd.ones({ 4, 7 }), unpack(params) }))
    local r, err = run(e, { nd.ones({ 5, 7 }), unpack(params) }, 1)
    assert.is_nil(r)
    assert.matches("'data' is %(5, 7%) float32, compiled for %(4, 7%)", err)
    local _, err2 = compile(mlp(), { nd.ones({ 4, 7 }) })
    assert.matches("more than the 1 inputs", err2)
  end)

  it("names the node whose kernel fails", function()
    local g = graph()
    local a = C.mx_graph_add_var(g, "a")
    local i = C.mx_graph_add_var(g, "i")
    local t = op(g, "pick1", "take", { a, i }, { mode = "raise" })
    heads(g, { t })
    local ins = { nd.ones({ 3, 2 }), nd.array({ 7 }) }
    local e = assert(compile(g, ins))
    local ok, err = pcall(function()
      local r, msg = run(e, ins, 1)
      if not r then error(msg) end
      r[1]:wait_to_read()
    end)
    assert.is_false(ok)
    assert.matches("pick1", tostring(err))
  end)
end)
