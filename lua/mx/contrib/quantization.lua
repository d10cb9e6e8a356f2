-- mx.contrib.quantization — INT8 inference, MXNet 1.9's mx.contrib.quantization:
--   quantize_net(net, {quantized_dtype="auto"|"int8"|"uint8", exclude_layers=,
--     exclude_layers_match=, exclude_operators=, calib_data=, calib_mode="none"|"naive"|
--     "entropy", num_calib_batches=, num_calib_examples=, data_shapes=, ctx=,
--     bias_correction=false}) -> SymbolBlock
--   quantize_model(sym, arg_params, aux_params, {data_names={"data"}, same options})
--     -> qsym, qarg_params, aux_params
-- The pass (MXNet's oneDNN flow, quantize_graph_pass + the oneDNN subgraph fusions):
-- convolution [+ batch_norm folded into its weight and bias] [+ relu] [+ an elementwise
-- add of another tensor (a residual) [+ relu]] becomes one quantized_conv, fully_connected
-- [+ relu] one quantized_fully_connected (relu or ReLU6, clip(x, 0, 6): the cap is the
-- output range's end); max/avg pooling, flatten, relu, zero padding and concat of
-- quantized tensors stay quantized (quantized_pooling, ..., pad of the int8 data). quantize_v2 enters int8
-- where a quantized layer reads a float tensor, dequantize leaves it where a float op
-- reads a quantized one, and a quantized layer read by float ops only writes float32 (the
-- last FullyConnected, as MXNet's). Calibration runs the float graph on calib_data and
-- sets every quantized layer's output range (min/max_calib_range): naive the min and max
-- seen, entropy the KL-optimal threshold (mx.contrib.quantization.calib); with "none" the
-- ranges are found at run time (quantize_v2 of each layer's input, float32 outputs).
-- Weights become int8 with one float32 scale per output channel (<weight>_wscale).
-- bias_correction (a luamx option; MXNet has none): calibration also takes each quantized
-- layer's input mean (per channel), and the layer's bias loses the shift its weight's
-- rounding causes, (dequantized - float weight) . mean (Nagel et al. 2019's bias correction).
-- It sits above Gluon (it makes a SymbolBlock), as the model zoos.
local nd = require("mx.nd")
local sym = require("mx.symbol")
local E = require("mx.graph.executor")
local calib = require("mx.contrib.quantization.calib")
local gluon = require("mx.gluon")
local X = require("mx.gluon._export")
local autograd = require("mx.autograd")

local M = {}

local OPTS = { quantized_dtype = true, exclude_layers = true, exclude_layers_match = true,
  exclude_operators = true, calib_data = true, calib_mode = true, num_calib_batches = true,
  num_calib_examples = true, data_shapes = true, ctx = true, data_names = true,
  quantize_mode = true, quantize_granularity = true, logger = true, bias_correction = true }

local function key(e) return tostring(e[1]) .. "#" .. e[2] end
local function opname(n) return n.op and n.op.name end
local function is_relu(n)
  return n.op and (n.op.name == "relu" or (n.op.name == "activation" and
    (n.opts and n.opts.act_type or "relu") == "relu"))
end
-- clip(x, 0, a_max) (ReLU6): a relu whose output range is capped; its a_max or nil
local function relu_cap(n)
  local o = n.opts
  if n.op and n.op.name == "clip" and o and o.a_min == 0 and o.a_max and o.a_max > 0 then
    return o.a_max
  end
end
-- Flatten as a trace records it: reshape to (0, -1)
local function is_flat_reshape(n)
  local sh = n.op and n.op.name == "reshape" and n.opts and n.opts.shape
  return sh and #sh == 2 and sh[1] == 0 and sh[2] == -1 or false
end
local function copy(t)
  local r = {}
  for k, v in pairs(t or {}) do r[k] = v end
  return r
end

local function check(who, opts, level)
  if opts ~= nil and type(opts) ~= "table" then
    error(who .. ": options must be a table, got " .. type(opts), level + 1)
  end
  opts = opts or {}
  for k in pairs(opts) do
    if not OPTS[k] then error(who .. ": unknown option '" .. tostring(k) .. "'", level + 1) end
  end
  local qd = opts.quantized_dtype or "auto"
  if qd ~= "auto" and qd ~= "int8" and qd ~= "uint8" then
    error(who .. ": quantized_dtype must be 'auto', 'int8' or 'uint8', got " .. tostring(qd), level + 1)
  end
  local cm = opts.calib_mode or "none"
  if cm ~= "none" and cm ~= "naive" and cm ~= "entropy" then
    error(who .. ": calib_mode must be 'none', 'naive' or 'entropy', got " .. tostring(cm), level + 1)
  end
  if opts.bias_correction and cm == "none" then
    error(who .. ": bias_correction needs calib_data and a calib_mode (the inputs' means)", level + 1)
  end
  if cm ~= "none" and opts.calib_data == nil then
    error(who .. ": calib_mode '" .. cm .. "' needs calib_data", level + 1)
  end
  if (opts.quantize_granularity or "channel-wise") ~= "channel-wise" then
    error(who .. ": only channel-wise weight quantization is implemented", level + 1)
  end
  return opts, qd, cm
end

---------------------------------------------------------------- fusion plan
-- chains[end node] = { conv=, bn=, act=, add=, sum=entry, post=, fc= }, member[node] = chain
local function plan(order, excluded)
  local readers = {}
  for _, n in ipairs(order) do
    for _, e in ipairs(n.inputs or {}) do
      local k = key(e)
      readers[k] = readers[k] or {}
      table.insert(readers[k], n)
    end
  end
  local function only(n)
    local r = readers[tostring(n) .. "#1"]
    if r and #r == 1 and not excluded(r[1]) then return r[1] end
  end
  local chains, member, add_owner = {}, {}, {}
  for _, n in ipairs(order) do
    local o = opname(n)
    if (o == "convolution" or o == "fully_connected") and not excluded(n) then
      local ok = true
      if o == "convolution" then
        local l = n.opts and n.opts.layout
        ok = (l == nil or l == "None" or l == "NCHW" or l == "NCW" or l == "NCDHW")
      end
      if ok then
        local c = { head = n, kind = o }
        local last = n
        local nx = only(last)
        if o == "convolution" and nx and opname(nx) == "batch_norm" and nx.inputs[1][1] == last then
          c.bn, last = nx, nx
          nx = only(last)
        end
        if nx and (is_relu(nx) or relu_cap(nx)) and not (n.opts and n.opts.act_type == "relu") then
          c.act, c.cap, last = nx, relu_cap(nx), nx
          nx = only(last)
        end
        if o == "convolution" and nx and (opname(nx) == "add") and #nx.inputs == 2 then
          local other = nx.inputs[1][1] == last and nx.inputs[2] or nx.inputs[1]
          -- the first convolution (in graph order) to reach an add takes it, the other
          -- operand is its sum: MXNet's oneDNN conv+sum fusion (ResNet: the body's last
          -- convolution, the shortcut's added)
          if other[1] ~= last and add_owner[nx] == nil then
            c.add, c.sum, last = nx, other, nx
            add_owner[nx] = c
            local r2 = only(nx)
            if r2 and is_relu(r2) then c.post, last = r2, r2 end
          end
        end
        c.last = c.last or last
        chains[#chains + 1] = c
      end
    end
  end
  local ends = {}
  for _, c in ipairs(chains) do
    if not c.add then c.post = nil end
    c.last = c.post or c.add or c.act or c.bn or c.head
    if c.add and c.post == nil then c.last = c.add end
    ends[c.last] = c
    for _, f in ipairs({ "head", "bn", "act", "add", "post" }) do
      if c[f] then member[c[f]] = c end
    end
  end
  return ends, member, readers
end

---------------------------------------------------------------- calibration
local function batches(who, data, opts, level)
  local list = {}
  local limit = opts.num_calib_batches
  local ex_limit = opts.num_calib_examples
  local seen = 0
  local function add(b)
    if limit and #list >= limit then return false end
    if ex_limit and seen >= ex_limit then return false end
    local x = nd.is_tensor(b) and b or (type(b) == "table" and b[1])
    if not nd.is_tensor(x) then
      error(who .. ": calib_data must give tensors (or {data, label} lists), got " .. type(x), level + 1)
    end
    list[#list + 1] = x
    seen = seen + x:shape()[1]
    return true
  end
  if nd.is_tensor(data) then add(data)
  elseif type(data) == "table" and type(data.iter) == "function" then
    for x in data:iter() do if not add(x) then break end end
  elseif type(data) == "table" then
    for _, b in ipairs(data) do if not add(b) then break end end
  else
    error(who .. ": calib_data must be a tensor, a list of batches or a DataLoader", level + 1)
  end
  return list
end

-- ranges[entry key] = {min, max} of the float graph's entries `want` over the batches;
-- means[entry key] the per-channel (or per-feature) means of those want_mean names (the
-- mode calib.mean takes)
local function calibrate(want, xs, data_node, params, mode, want_mean)
  local ents, keys = {}, {}
  for k, e in pairs(want) do
    ents[#ents + 1] = sym._node_symbol(e[1], e[2])
    keys[#keys + 1] = k
  end
  if #ents == 0 then return {}, {} end
  local g = sym.Group(ents)
  local stats = {}
  for i = 1, #keys do stats[i] = {} end
  local function run(x)
    local vals = {}
    for node, v in pairs(params) do vals[node] = v end
    vals[data_node] = x
    return autograd.predict_mode(function() return E._eval_dag(g, vals) end)
  end
  local means = {}
  for _, x in ipairs(xs) do
    local outs = run(x)
    for i = 1, #keys do
      calib.minmax(stats[i], outs[i])
      local how = want_mean and want_mean[keys[i]]
      if how then calib.mean(stats[i], outs[i], how) end
    end
  end
  for i, k in ipairs(keys) do
    if stats[i].sum then means[k] = calib.mean_of(stats[i]) end
  end
  if mode == "entropy" then
    for _, x in ipairs(xs) do
      local outs = run(x)
      for i = 1, #keys do calib.hist(stats[i], outs[i]) end
    end
  end
  local r = {}
  for i, k in ipairs(keys) do
    local st = stats[i]
    if mode == "entropy" then
      local t = calib.threshold(st)
      r[k] = { st.min >= 0 and 0 or -t, t }
    else
      r[k] = { st.min, st.max }
    end
  end
  return r, means
end

---------------------------------------------------------------- weights
-- int8 weight (F, ...) and its per-channel float32 scale from w (float32)
local function quantize_weight(w)
  local F = w:shape()[1]
  local flat = w:reshape({ F, -1 })
  local amax = nd.max(nd.abs(flat), { axis = 2 })
  local scale = nd.maximum(nd.div(amax, 127), 1e-30)
  local q = nd.round(nd.div(flat, nd.reshape(scale, { F, 1 })))
  q = nd.clip(q, { a_min = -127, a_max = 127 }):astype("int8"):reshape(w:shape())
  return q, scale:astype("float32")
end

-- the bias less the mean shift the weight's rounding causes, (dequantized - float)
-- weight times the input's calibration mean (per input channel of a convolution, summed
-- over the kernel's taps; per feature of a fully connected layer)
local function correct_bias(w, qw, sc, b, mean, head)
  local F = w:shape()[1]
  local dq = nd.mul(nd.reshape(qw:astype("float32"), { F, -1 }), nd.reshape(sc, { F, 1 }))
  local dw = nd.sub(dq, nd.reshape(w, { F, -1 }))
  local shift
  if w:ndim() > 2 then
    local cin_g = w:shape()[2]
    local g = head.opts and head.opts.num_group or 1
    local taps = nd.sum(nd.reshape(dw, { F, cin_g, -1 }), { axis = 3 }) -- (F, Cin/g)
    local ex = nd.reshape(mean, { g, 1, cin_g })
    ex = nd.reshape(nd.broadcast_to(ex, { shape = { g, F / g, cin_g } }), { F, cin_g })
    shift = nd.sum(nd.mul(taps, ex), { axis = 2 })
  else
    shift = nd.sum(nd.mul(dw, nd.reshape(mean, { 1, -1 })), { axis = 2 })
  end
  return nd.sub(b or nd.zeros({ F }), shift)
end

-- conv weight/bias with batch_norm folded in (per output channel)
local function fold_bn(w, b, bn, get)
  local gamma, beta = get(bn.inputs[2]), get(bn.inputs[3])
  local mean, var = get(bn.inputs[4]), get(bn.inputs[5])
  local eps = bn.opts and bn.opts.eps or 1e-3
  local fix = bn.opts == nil or bn.opts.fix_gamma == nil or bn.opts.fix_gamma
  if fix then gamma = nd.ones_like(gamma) end
  local k = nd.div(gamma, nd.sqrt(nd.add(var, eps)))
  local F = w:shape()[1]
  local shape = { F }
  for _ = 2, w:ndim() do shape[#shape + 1] = 1 end
  local w2 = nd.mul(w, nd.reshape(k, shape))
  local b0 = b or nd.zeros({ F })
  local b2 = nd.add(nd.mul(nd.sub(b0, mean), k), beta)
  return w2, b2
end

---------------------------------------------------------------- the pass
local function quantize_symbol(who, s, args, auxs, opts, level)
  local o, qd, cm = check(who, opts, level + 1)
  local order = s:_topo()
  local ex_names, ex_ops = {}, {}
  for _, n in ipairs(o.exclude_layers or {}) do ex_names[n] = true end
  for _, n in ipairs(o.exclude_operators or {}) do ex_ops[n] = true end
  local function excluded(n)
    if not n.op then return false end
    if ex_names[n.name] or ex_ops[n.op.name] then return true end
    for _, m in ipairs(n.op.mxnet) do if ex_ops[m] then return true end end
    for _, pat in ipairs(o.exclude_layers_match or {}) do
      if n.name:find(pat) then return true end
    end
    return false
  end
  local ends, member, readers = plan(order, excluded)
  local data_names = o.data_names or { "data" }
  local data_node
  local values = {} -- variable node -> its array
  for _, n in ipairs(order) do
    if n.op == nil then
      local v = args[n.name] or auxs[n.name] or n.value
      if v then values[n] = v
      elseif n.name == data_names[1] or not data_node then data_node = data_node or n end
    end
  end
  local function get(e) return values[e[1]] end
  -- which float ops stay quantized when their input is quantized
  local function passthrough(n)
    if excluded(n) then return false end
    local op = opname(n)
    if op == "pooling" then
      local t = n.opts and n.opts.pool_type or "max"
      local l = n.opts and n.opts.layout
      return (t == "max" or t == "avg") and (l == nil or l == "NCHW" or l == "NCW" or l == "NCDHW")
    end
    if op == "pad" then -- zero padding: exact in int8 (0 is 0)
      local po = n.opts or {}
      return (po.mode or "constant") == "constant" and (po.constant_value or 0) == 0
    end
    return op == "flatten" or is_flat_reshape(n) or is_relu(n) or op == "concat"
  end
  -- entries to calibrate: every chain's output and input data, every sum input
  local want = {}
  for last, c in pairs(ends) do
    want[tostring(last) .. "#1"] = { last, 1 }
    want[key(c.head.inputs[1])] = c.head.inputs[1]
    if c.sum then want[key(c.sum)] = c.sum end
  end
  local ranges, means = {}, {}
  local want_mean
  if o.bias_correction then
    want_mean = {}
    for _, c in pairs(ends) do
      local w = get(c.head.inputs[2])
      -- a fully connected layer's features: its weight's columns (a flattened row, or the
      -- last axis with flatten = false)
      want_mean[key(c.head.inputs[1])] = c.kind == "convolution" and "channel"
        or (w and w:shape()[2])
    end
  end
  if cm ~= "none" then
    local xs = batches(who, o.calib_data, o, level + 1)
    if #xs == 0 then error(who .. ": calib_data gave no batch", level + 1) end
    ranges, means = calibrate(want, xs, data_node, values, cm, want_mean)
  end
  local function out_type_of(r)
    if qd == "int8" then return "int8" end
    if qd == "uint8" and r and r[1] >= 0 then return "uint8" end
    return "auto"
  end
  -- the new graph
  local fsym, qsym = {}, {} -- entry key -> float Symbol / { q, min, max } Symbols
  local newargs, newauxs = {}, {}
  local deq, qin = {}, {}
  local function float_of(e)
    local k = key(e)
    if fsym[k] then return fsym[k] end
    local q = qsym[k]
    if not q then error("quantize: no value for entry " .. e[1].name .. "#" .. e[2], 0) end
    if not deq[k] then
      deq[k] = sym.dequantize(q[1], q[2], q[3], { name = e[1].name .. "_dequantize" })
    end
    return deq[k]
  end
  local function quant_of(e)
    local k = key(e)
    if qsym[k] then return qsym[k] end
    if not qin[k] then
      local r = ranges[k]
      local qo = { name = e[1].name .. "_quantize", out_type = qd }
      if r then
        qo.min_calib_range, qo.max_calib_range = r[1], r[2]
        if qd == "auto" then qo.out_type = "auto" end
      elseif qd == "auto" then
        qo.out_type = "int8"
      end
      local q = sym.quantize_v2(float_of(e), qo)
      local node = q.outputs[1][1]
      qin[k] = { sym._node_symbol(node, 1), sym._node_symbol(node, 2), sym._node_symbol(node, 3) }
    end
    return qin[k]
  end
  -- a layer writes int8 when calibrated and some reader of its output is quantized
  local function q_readers(last)
    for _, r in ipairs(readers[tostring(last) .. "#1"] or {}) do
      if ends[r] or member[r] or passthrough(r) then return true end
    end
    return false
  end
  local function var(name, v)
    newargs[name] = v
    return sym.var(name)
  end
  for _, n in ipairs(order) do
    local c = ends[n]
    if n.op == nil then
      fsym[tostring(n) .. "#1"] = sym._node_symbol(n, 1)
      if args[n.name] then newargs[n.name] = args[n.name] end
      if auxs[n.name] then newauxs[n.name] = auxs[n.name] end
    elseif c then
      local h = c.head
      local w = get(h.inputs[2])
      local b = (not (h.opts and h.opts.no_bias)) and h.inputs[3] and get(h.inputs[3]) or nil
      if not w then error(who .. ": the weight of '" .. h.name .. "' has no value", level + 1) end
      if c.bn then w, b = fold_bn(w, b, c.bn, get) end
      local qw, sc = quantize_weight(w)
      local mean = means[key(h.inputs[1])]
      if mean then b = correct_bias(w, qw, sc, b, mean, h) end
      local wname = h.inputs[2][1].name
      local q = quant_of(h.inputs[1])
      local ins = { q[1], q[2], q[3], var(wname .. "_quantized", qw), var(wname .. "_wscale", sc) }
      if b then ins[#ins + 1] = var(h.name .. "_bias_quantized", b:astype("float32")) end
      local po = copy(h.opts)
      po.no_bias = b == nil
      if c.act then po.act_type = "relu" end
      if c.add then
        local sq = quant_of(c.sum)
        ins[#ins + 1], ins[#ins + 2], ins[#ins + 3] = sq[1], sq[2], sq[3]
        po.with_sum = true
        if c.post then po.postsum_act = "relu" end
      end
      local r = ranges[tostring(n) .. "#1"]
      local qout = r ~= nil and q_readers(n)
      if qout then
        -- a capped relu (ReLU6): its calibrated range ends at the cap, where int8 saturates
        po.min_calib_range, po.max_calib_range = r[1], c.cap and math.min(r[2], c.cap) or r[2]
        po.out_type = out_type_of(r)
      else
        po.out_type = "float32"
      end
      po.name = "quantized_" .. h.name
      ins[#ins + 1] = po
      local f = c.kind == "convolution" and sym.quantized_conv or sym.quantized_fully_connected
      local node = f(unpack(ins)).outputs[1][1]
      if qout then
        qsym[tostring(n) .. "#1"] = { sym._node_symbol(node, 1), sym._node_symbol(node, 2),
          sym._node_symbol(node, 3) }
      elseif c.cap then -- float32 out: the cap as a clip
        fsym[tostring(n) .. "#1"] = sym.clip(sym._node_symbol(node, 1),
          { a_min = 0, a_max = c.cap, name = c.act.name })
      else
        fsym[tostring(n) .. "#1"] = sym._node_symbol(node, 1)
      end
    elseif member[n] then
      -- inside a fused chain: made at the chain's last node
      local _ = n
    else
      local all_q = #n.inputs > 0
      for _, e in ipairs(n.inputs) do all_q = all_q and qsym[key(e)] ~= nil end
      if all_q and passthrough(n) then
        local op = opname(n)
        local node
        if op == "concat" then
          local ins = {}
          for i, e in ipairs(n.inputs) do ins[i] = qsym[key(e)][1] end
          for _, e in ipairs(n.inputs) do
            ins[#ins + 1] = qsym[key(e)][2]
            ins[#ins + 1] = qsym[key(e)][3]
          end
          ins[#ins + 1] = { num_args = #n.inputs, dim = n.opts and n.opts.dim or 2,
            name = "quantized_" .. n.name }
          node = sym.quantized_concat(unpack(ins)).outputs[1][1]
        else
          local q = qsym[key(n.inputs[1])]
          local po = { name = "quantized_" .. n.name }
          local f
          if op == "pad" then
            for k, v in pairs(n.opts or {}) do po[k] = v end
            node = sym.pad(q[1], po).outputs[1][1]
            qsym[tostring(n) .. "#1"] = { sym._node_symbol(node, 1), q[2], q[3] }
          else
            if op == "pooling" then f = sym.quantized_pooling for k, v in pairs(n.opts or {}) do po[k] = v end
            elseif op == "flatten" or op == "reshape" then f = sym.quantized_flatten
            else f = sym.quantized_act end
            node = f(q[1], q[2], q[3], po).outputs[1][1]
          end
        end
        qsym[tostring(n) .. "#1"] = qsym[tostring(n) .. "#1"] or { sym._node_symbol(node, 1),
          sym._node_symbol(node, 2), sym._node_symbol(node, 3) }
      else
        local ins = {}
        for i, e in ipairs(n.inputs) do ins[i] = float_of(e) end
        local po = copy(n.opts)
        po.name = n.name
        if next(n.attrs or {}) then po.attr = copy(n.attrs) end
        ins[#ins + 1] = po
        local node = sym[n.op.name](unpack(ins)).outputs[1][1]
        for k = 1, n.nout do fsym[tostring(n) .. "#" .. k] = sym._node_symbol(node, k) end
      end
    end
  end
  local outs = {}
  for i, e in ipairs(s.outputs) do outs[i] = float_of(e) end
  local qs = #outs == 1 and outs[1] or sym.Group(outs)
  -- keep only the arrays the new graph reads
  local used = {}
  for _, name in ipairs(qs:list_inputs()) do used[name] = true end
  local a2, x2 = {}, {}
  for k, v in pairs(newargs) do if used[k] then a2[k] = v end end
  for k, v in pairs(newauxs) do if used[k] then x2[k] = v end end
  return qs, a2, x2, data_node and data_node.name or data_names[1]
end

function M.quantize_model(s, arg_params, aux_params, opts)
  if not sym.is_symbol(s) then error("quantize_model: sym must be a Symbol, got " .. type(s), 2) end
  local qs, a, x = quantize_symbol("quantize_model", s, arg_params or {}, aux_params or {}, opts, 2)
  return qs, a, x
end

function M.quantize_net(net, opts)
  local who = "quantize_net"
  if type(net) ~= "table" or type(net.hybridize) ~= "function" then
    error(who .. ": expected a HybridBlock, got " .. type(net), 2)
  end
  local ok = pcall(X.symbol_of, net, 1, false, who)
  if not ok then
    -- trace it once on the first calibration batch (or data_shapes)
    local o = opts or {}
    local x
    if o.data_shapes then x = nd.zeros(o.data_shapes[1])
    elseif o.calib_data then
      x = batches(who, o.calib_data, { num_calib_batches = 1 }, 2)[1]
    end
    if not x then error(who .. ": the net has no traced graph: give calib_data or data_shapes", 2) end
    net:hybridize()
    autograd.predict_mode(function() return net(x) end)
  end
  local s, arrays = X.symbol_of(net, 2, false, who)
  local args, auxs = {}, {}
  for k, v in pairs(arrays) do
    local kind, name = k:match("^(%a+):(.*)$")
    if kind == "aux" then auxs[name] = v else args[name] = v end
  end
  local qs, a2, x2, data_name = quantize_symbol(who, s, args, auxs, opts, 2)
  local b = gluon.SymbolBlock(qs, sym.var(data_name))
  local params = b:collect_params()
  for _, t in ipairs({ a2, x2 }) do
    for name, v in pairs(t) do
      local p = params:get(name)
      if p then
        if p.dtype ~= v:dtype() then p:cast(v:dtype()) end
        p:set_data(v)
      end
    end
  end
  return b
end

return M
