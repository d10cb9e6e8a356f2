-- mx.gluon._export — HybridBlock:export (MXNet's symbol JSON + .params of a hybridized
-- block's traced graph) and SymbolBlock (a HybridBlock running a symbol's DAG with
-- Parameters for its arguments and auxiliary states; SymbolBlock.imports reads files
-- MXNet 1.9.1 or export wrote). docs/export.md is the user's page.
--
-- export reads the last traced variant of the block (gluon/_hybrid.lua: v.frec.g, whose
-- first v.nout heads are the block's outputs; v.fvars names its variables' sources),
-- lifts it to mx.sym's Lua DAG keeping only those outputs, and writes it through the
-- core's JSON writer. Variables: the block's inputs ("data", "data0"...), its parameters
-- (collect_params names; "aux:" when an op reads them at an auxiliary input) and the
-- trace's constants ("_const<k>", saved as "arg:" too).
local nd = require("mx.nd")
local sym = require("mx.symbol")
local SG = require("mx.graph.symbol_graph")
local E = require("mx.graph.executor")
local file = require("mx.core.file")
local block = require("mx.gluon.block")
local Parameter = require("mx.gluon.parameter").Parameter
local hybrid = require("mx.gluon._hybrid")
local XS = require("mx.gluon._export_shapes")
local initializer = require("mx.initializer")
local context = require("mx.context")
local SP = require("mx.graph.symbol_params")
local lib = require("mx.core.lib")
local caller = require("mx.core.caller")
local IX = require("mx.graph.index_ops")

local type, error, tostring, pairs, ipairs, unpack, select, pcall, rawget, rawset, tonumber =
  type, error, tostring, pairs, ipairs, unpack, select, pcall, rawget, rawset, tonumber

local X = {}

---------------------------------------------------------------- the DAG
local ops_by_name = lib.ops_by_name
local ffi, C = lib.ffi, lib.C

-- luamx's fused activation of fully_connected / convolution / deconvolution (act_type,
-- an extension MXNet's operators lack) becomes an Activation node of its own in export.
local FUSED_ACT = { fully_connected = true, convolution = true, deconvolution = true }

local function act_node(base, act)
  local op, opts = ops_by_name.activation, { act_type = act }
  if act == "relu6" then op, opts = ops_by_name.clip, { a_min = 0, a_max = 6 } end
  local P0, _, err = nd._fill_params(op, opts)
  if err then error("export: " .. err, 0) end
  return { name = base.name .. "_" .. act, op = op, P = SP.copy(op, P0), opts = opts,
    attrs = {}, nout = 1, nvis = 1, inputs = { { base, 1 } } }
end

-- Ops with no MXNet operator, written as MXNet 1.9's equivalents (a chain of nodes whose
-- ops MXNet has; the last gives the op's output): LOWER[name](x, param, mk, ins, shapes)
-- -> entry, with x the op's input entry (ins: all of them), param(name) the node's param
-- value, mk(op_name, inputs, opts) making a node and shapes the inputs' shapes in the
-- trace (nil when unknown); nil: no equivalent for these inputs (the export refuses the op).
local SQRT_2_PI = math.sqrt(2 / math.pi)
local LOWER
LOWER = {
  silu = function(x, param, mk) -- x * sigmoid(beta x)
    local b = param("beta")
    local bx = b == 1 and x or mk("mul_scalar", { x }, { scalar = b })
    return mk("mul", { x, mk("sigmoid", { bx }) })
  end,
  gelu = function(x, param, mk)
    if param("approximation") == "erf" then return mk("leaky_relu", { x }, { act_type = "gelu" }) end
    -- 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    local x3 = mk("mul", { mk("mul", { x, x }), x })
    local inner = mk("mul_scalar", { mk("add", { x, mk("mul_scalar", { x3 }, { scalar = 0.044715 }) }) },
      { scalar = SQRT_2_PI })
    local t = mk("add_scalar", { mk("tanh", { inner }) }, { scalar = 1 })
    return mk("mul", { mk("mul_scalar", { x }, { scalar = 0.5 }), t })
  end,
  mish = function(x, _, mk) -- x * tanh(softrelu(x))
    return mk("mul", { x, mk("tanh", { mk("activation", { x }, { act_type = "softrelu" }) }) })
  end,
  log_sigmoid = function(x, _, mk) -- -softrelu(-x)
    return mk("neg", { mk("activation", { mk("neg", { x }) }, { act_type = "softrelu" }) })
  end,
  hard_swish = function(x, _, mk) -- x * clip(x / 6 + 1/2, 0, 1)
    return mk("mul", { x, mk("hard_sigmoid", { x }, { alpha = 1 / 6, beta = 0.5 }) })
  end,
  -- numpy's matmul (MXNet 1.9 has no broadcasting matmul outside its numpy namespace):
  -- dot where b is a matrix (dot sums a's last axis with b's first), batch_dot /
  -- linalg_gemm2 of stacks of the same batch dims, else batch_dot of the stacks, their
  -- batch dims broadcast (broadcast_like) and merged (Reshape,
  -- matched from the right), the result's batch dims restored (all but the first fixed
  -- at the traced sizes); a matrix a multiplies the stack b as (b^T a^T)^T; a 1-d operand
  -- is a one-row (a) or one-column (b) matrix, that dim squeezed after
  matmul = function(x0, param, mk, ins, shapes)
    local a, b = shapes and shapes[1], shapes and shapes[2]
    if not (a and b) or (#a == 1 and #b == 1) then return nil end
    -- a 1-d operand: a matrix of one row (a) or one column (b), that dim squeezed after
    if #a == 1 or #b == 1 then
      local a2, b2, ia, ib = a, b, ins[1], ins[2]
      if #a == 1 then a2, ia = { 1, a[1] }, mk("expand_dims", { ins[1] }, { axis = 1 }) end
      if #b == 1 then b2, ib = { b[1], 1 }, mk("expand_dims", { ins[2] }, { axis = 2 }) end
      local y = LOWER.matmul(x0, param, mk, { ia, ib }, { a2, b2 })
      if y == nil then return nil end
      local r = math.max(#a2, #b2)
      return mk("squeeze", { y }, { axis = { #a == 1 and r - 1 or r } })
    end
    if #b == 2 then return mk("dot", { ins[1], ins[2] }) end
    local nb = #b
    if #a == 2 then
      local bt = mk("swapaxes", { ins[2] }, { dim1 = nb, dim2 = nb - 1 })
      local at = mk("transpose", { ins[1] })
      local r = mk("dot", { bt, at })
      return mk("swapaxes", { r }, { dim1 = nb, dim2 = nb - 1 })
    end
    if #a == #b then
      local same = true
      for d = 1, #a - 2 do same = same and a[d] == b[d] end
      if same then return mk(#a == 3 and "batch_dot" or "linalg_gemm2", { ins[1], ins[2] }) end
    end
    local r = math.max(#a, #b)
    local function batch(s) -- s's batch dims, right-aligned to r - 2
      local t = {}
      for d = 1, r - 2 do t[d] = s[d - (r - #s)] or 1 end
      return t
    end
    local ba, bb, out = batch(a), batch(b), {}
    for d = 1, r - 2 do
      if ba[d] ~= bb[d] and ba[d] ~= 1 and bb[d] ~= 1 then return nil end
      out[d] = math.max(ba[d], bb[d])
    end
    local function align(x, s)
      for _ = #s + 1, r do x = mk("expand_dims", { x }, { axis = 1 }) end
      return x
    end
    local xa, xb = align(ins[1], a), align(ins[2], b)
    local function stack(x, other, bs)
      local axes = {}
      for d = 1, r - 2 do if bs[d] ~= out[d] then axes[#axes + 1] = d end end
      if #axes > 0 then -- the other's sizes there (not the traced ones)
        x = mk("broadcast_like", { x, other }, { lhs_axes = axes, rhs_axes = axes })
      end
      if r == 3 then return x end
      return mk("reshape", { x }, { shape = { -1, 0, 0 }, reverse = true })
    end
    local y = mk("batch_dot", { stack(xa, xb, ba), stack(xb, xa, bb) })
    if r == 3 then return y end
    local shape = { -1 }
    for d = 2, r - 2 do shape[d] = out[d] end
    shape[r - 1], shape[r] = a[#a - 1], b[#b]
    return mk("reshape", { y }, { shape = shape })
  end,
  -- take along the first axis of a parameter or constant matrix (clipped positions):
  -- MXNet's Embedding (whose weight shape the file fixes) at the 0-based positions, which
  -- the C runtime runs too (the other takes and picks are MXNet's ops on the converted
  -- positions: mx.graph.index_ops)
  take = function(_, param, mk, ins, shapes)
    local a = shapes and shapes[1]
    local ax = param("axis")
    if not (a and #a == 2 and (ax == 1 or ax == -2) and param("mode") == "clip"
        and ins[1][1].op == nil) then
      return nil
    end
    return mk("embedding", { mk("sub_scalar", { ins[2] }, { scalar = 1 }), ins[1] },
      { input_dim = a[1], output_dim = a[2] })
  end,
  -- pick along the last axis of a matrix (clipped positions): the one-hot rows of the
  -- 0-based positions (Embedding of an identity), where they are set x, summed over the row
  pick = function(_, param, mk, ins, shapes)
    local a, i = shapes and shapes[1], shapes and shapes[2]
    local ax = param("axis")
    if not (a and i and #a == 2 and #i == 1 and (ax == 2 or ax == -1) and param("mode") == "clip") then
      return nil
    end
    local n = a[2]
    local oh = mk("embedding", { mk("sub_scalar", { ins[2] }, { scalar = 1 }), mk("eye", {}, { N = n }) },
      { input_dim = n, output_dim = n })
    local picked = mk("where", { oh, ins[1], mk("mul_scalar", { oh }, { scalar = 0 }) })
    return mk("sum", { picked }, { axis = { 2 }, keepdims = param("keepdims") == true })
  end,
}

-- the entry standing for node c (a copy whose op has a LOWER rule): the rule's chain
local function lower_node(c, shapes)
  local k = 0
  local function mk(opname, inputs, opts)
    local op = ops_by_name[opname]
    local P0, _, err = nd._fill_params(op, opts or {})
    if err then error("export: " .. err, 0) end
    k = k + 1
    return { { name = c.name .. "_" .. opname .. k, op = op, P = SP.copy(op, P0), opts = opts or {},
      attrs = {}, nout = 1, nvis = 1, inputs = inputs }, 1 }
  end
  local function param(name)
    local v = c.opts and c.opts[name]
    if v ~= nil then return v end
    local pi = c.op.pindex[name]
    if c.P == nil then return pi.default end
    v = c.P[name]
    if pi.values then return pi.values[v + 1] end
    return tonumber(v)
  end
  return LOWER[c.op.name](c.inputs[1], param, mk, c.inputs, shapes)
end

-- A private copy of the nodes reachable from `outputs` (entries {node, out}): train-mode
-- params left to the autograd flag / the executor (a graph read from a file holds
-- training=false, which would pin eager calls to inference), constants kept. With
-- for_mxnet, fused activations are split off (FUSED_ACT). reshape_fix: node name ->
-- the target in MXNet's codes (mx.gluon._export_shapes); reshape_in: the reshapes'
-- input shapes, for the batch-dim rule when no analysis was made.
local function clone(outputs, for_mxnet, reshape_in, reshape_fix, in_shapes)
  local map = {}
  for _, n in ipairs(SG.topo(outputs)) do
    local c = { name = n.name, op = n.op, P = n.P, attrs = {}, nout = n.nout, nvis = n.nvis,
      value = n.value, inputs = {} }
    for k, v in pairs(n.attrs or {}) do c.attrs[k] = v end
    for j, e in ipairs(n.inputs) do
      local src = map[e[1]]
      c.inputs[j] = { src[e[2]] and src[e[2]][1] or src.node, src[e[2]] and src[e[2]][2] or e[2] }
    end
    local entry = { node = c }
    if n.op then
      local tp = n.op.train_param
      local act = for_mxnet and FUSED_ACT[n.op.name] and n.P and n.op.pindex.act_type
        and n.op.pindex.act_type.values[n.P.act_type + 1]
      if act == "none" then act = nil end
      -- a traced reshape keeping the input's first (batch) dim: MXNet's 0 (copy it), so
      -- the file takes any batch size (Flatten's x:reshape(n, -1) is traced with n)
      local ins = reshape_in and n.op.name == "reshape" and reshape_in[n.name]
      local batch = ins and n.P and n.P.shape.n >= 1 and ins[1] > 0 and n.P.shape.v[0] == ins[1]
      local codes = reshape_fix and n.op.name == "reshape" and reshape_fix[n.name]
      if (tp or act or batch or codes) and n.P then
        c.P = SP.copy(n.op, n.P)
        if tp then c.P[tp] = false end
        if act then c.P.act_type = 0 end
        if batch then c.P.shape.v[0] = 0 end
        if codes then
          c.P.shape.n = #codes
          for j, d in ipairs(codes) do c.P.shape.v[j - 1] = d end
        end
      end
      if n.opts then
        local o = {}
        for k, v in pairs(n.opts) do if k ~= tp and not (act and k == "act_type") then o[k] = v end end
        if batch and o.shape then
          o.shape = { unpack(o.shape) }
          o.shape[1] = 0
        end
        if codes then o.shape = { unpack(codes) } end
        c.opts = o
      end
      if act then entry[1] = { act_node(c, act), 1 } end
      if for_mxnet and #n.op.mxnet == 0 and LOWER[n.op.name] then
        entry[1] = lower_node(c, in_shapes and in_shapes[n.name])
      end
    end
    map[n] = entry
  end
  local outs = {}
  for k, e in ipairs(outputs) do
    local m = map[e[1]]
    outs[k] = m[e[2]] or { m.node, e[2] }
  end
  return setmetatable({ outputs = outs }, sym._mt)
end

---------------------------------------------------------------- export
local function check_epoch(epoch, level)
  if epoch == nil then return 0 end
  if type(epoch) ~= "number" or epoch % 1 ~= 0 or epoch < 0 or epoch > 9999 then
    error("export: epoch must be an integer in 0..9999, got " .. tostring(epoch), level + 1)
  end
  return epoch
end

-- symbol_of(block) -> s, arrays: the block's last traced graph as a Symbol (MXNet's op
-- names) and its arrays ("arg:<name>" / "aux:<name>" -> NDArray): what export writes, for
-- the passes that rewrite a block's graph (mx.amp.convert_hybrid_block, quantize_net).
-- mxnet_only: refuse ops MXNet does not have (export's files must load there).
function X.symbol_of(self, level, mxnet_only, who)
  who = who or "export"
  local name = tostring(getmetatable(self).__name)
  local v = rawget(self, "_active") and hybrid.last_variant(self)
  if not v then
    error(who .. ": " .. name .. " has no traced graph: call net:hybridize() and then run a "
      .. "forward pass (net(x)) at least once first", level + 1)
  end
  local lifted = sym._from_graph(v.frec.g)
  local outs = {}
  for k = 1, v.nout do outs[k] = lifted.outputs[k] end
  -- the input shapes of the trace's reshapes, by node name (the trace's steps hold its
  -- tensors; frec.ent gives each result's node)
  local g = v.frec.g
  local reshape_in, in_shapes = {}, {}
  for _, st in ipairs(v.frec.steps) do
    local e = st.outs[1] and v.frec.ent[st.outs[1]]
    if e and st.ins[1] and nd.is_tensor(st.ins[1]) then
      local node_name = ffi.string(C.mx_graph_node_name(g, e[1]))
      reshape_in[node_name] = st.ins[1]:shape()
      local sh = {}
      for j, x in ipairs(st.ins) do sh[j] = nd.is_tensor(x) and x:shape() or nil end
      in_shapes[node_name] = sh
    end
  end
  -- constants that followed the input's shape: reshape targets in MXNet's codes, the
  -- rest pins the input dims behind them (mx.gluon._export_shapes)
  local dep = XS.analyse(self, v)
  local s = clone(outs, true, not dep and reshape_in or nil, dep and dep.reshape, in_shapes)
  local order = s:_topo()
  for _, n in ipairs(order) do
    local pin = dep and n.op == nil and dep.pins[n.name]
    if pin then n.attrs.__shape__ = XS.shape_attr(pin) end
  end
  -- an RNN's begin states traced as zeros of (L*D, batch, H): the batch dim written as
  -- MXNet's 0 (inferred from the data, which the RNN op requires to match), as MXNet's
  -- own LSTM exports do, so the file takes any batch size
  for _, n in ipairs(order) do
    if n.op and n.op.name == "rnn" then
      for j = 3, 4 do
        local z = n.inputs[j] and n.inputs[j][1]
        if z and z.op and z.op.name == "zeros" and #z.inputs == 0 and z.P and z.P.shape.n == 3
          and z.P.shape.v[1] >= 0 then
          z.P = SP.copy(z.op, z.P)
          z.P.shape.v[1] = -1
          if z.opts and z.opts.shape then
            local o = {}
            for k2, v2 in pairs(z.opts) do o[k2] = v2 end
            o.shape = { unpack(z.opts.shape) }
            o.shape[2] = -1
            z.opts = o
          end
        end
      end
    end
  end
  -- ops MXNet must know
  for _, n in ipairs(order) do
    if mxnet_only and n.op and #n.op.mxnet == 0 and not IX.MXNET_NAMED[n.op.name] then
      error(string.format("export: node '%s' uses op '%s', which MXNet does not have: the "
        .. "exported file could not be loaded there (rewrite the forward with MXNet ops)",
        n.name, n.op.name), level + 1)
    end
  end
  -- variables: inputs, parameters, constants (fvars: the value-less ones in node-id
  -- order, reachable from the outputs or not)
  local spec_of, k = {}, 0
  for id = 0, C.mx_graph_num_nodes(g) - 1 do
    if C.mx_graph_node_op(g, id) == -1 and C.mx_graph_node_value(g, id) == nil then
      k = k + 1
      spec_of[ffi.string(C.mx_graph_node_name(g, id))] = v.fvars[k]
    end
  end
  local aux = SG.aux_set(order)
  local arrays = {}
  for _, n in ipairs(order) do
    if n.op == nil then
      local value
      local spec = spec_of[n.name]
      if n.value ~= nil then
        value = n.value
      elseif spec and spec.kind == "param" then
        value = spec.p._data
        if value == nil then
          error(who .. ": Parameter '" .. n.name .. "' is not initialized", level + 1)
        end
      end
      if value ~= nil then
        local key = (aux[n] and "aux:" or "arg:") .. n.name
        if arrays[key] ~= nil then
          error(who .. ": two variables are named '" .. n.name .. "'", level + 1)
        end
        arrays[key] = value
      end
    end
  end
  return s, arrays
end

-- export(block, path, epoch, {luamx_ops=false}) -> path-symbol.json, path-%04d.params.
-- luamx_ops: allow ops MXNet does not have (a quantized graph: the files then load in
-- luamx and its C runtime only).
function X.export(self, path, epoch, level, opts)
  level = level or 1
  if type(path) ~= "string" or path == "" then
    error("export: path must be a non-empty string, got " .. tostring(path), level + 1)
  end
  epoch = check_epoch(epoch, level + 1)
  local s, arrays = X.symbol_of(self, level + 1, not (opts and opts.luamx_ops))
  local sym_path = path .. "-symbol.json"
  local par_path = string.format("%s-%04d.params", path, epoch)
  -- The pair: each file is written atomically, the parameters first, then the symbol
  -- file naming them (their file name, size and CRC-32 in the top-level attrs, which
  -- MXNet ignores). A kill between the two leaves the new parameters beside the old
  -- symbol file, whose record no longer matches them: imports says so.
  local ok, err = pcall(nd.save, par_path, arrays) -- (no parameters: an empty dict file)
  if not ok then error("export: " .. tostring(err):gsub("^.-:%d+: ", ""), level + 1) end
  local crc, size = file.crc32(par_path)
  if not crc then error("export: " .. size, level + 1) end
  local js = X._with_params_record(s:tojson(), par_path, size, crc)
  file.write_atomic("export", sym_path, js, level + 1)
  return sym_path, par_path
end

-- The export record: "luamx_params": ["str", "<params file name>|<bytes>|<crc32 hex>"]
-- beside mxnet_version in a symbol file's top-level attrs.
local function basename(p) return (p:match("([^/]*)$")) end
function X._with_params_record(js, par_path, size, crc)
  local rec = string.format('"luamx_params":["str","%s|%d|%08x"]',
    (basename(par_path):gsub('[%c"\\|]', "_")), size, crc)
  local n
  js, n = js:gsub('("attrs"%s*:%s*{)(%s*"mxnet_version")', "%1" .. rec:gsub("%%", "%%%%") .. ",%2", 1)
  assert(n == 1, "export: the symbol file has no top-level attrs")
  return js
end

-- nil when the parameters file at par_path is the one the symbol file (text js) was
-- exported with, or has another name than that one (a checkpoint of another epoch); else
-- why not. Symbol files without the record (MXNet's, older luamx's) are not checked.
function X._params_mismatch(js, sym_path, par_path)
  local name, size, crc = js:match('"luamx_params"%s*:%s*%[%s*"str"%s*,%s*"([^"|]*)|(%d+)|(%x+)"')
  if not name or name ~= basename(par_path) then return nil end
  local c, sz = file.crc32(par_path)
  if not c then return nil end -- unreadable: the load says why
  if c == tonumber(crc, 16) and sz == tonumber(size) then return nil end
  return string.format("'%s' is not the parameters file exported with '%s' (that export wrote "
    .. "%s bytes with CRC-32 %s; this file has %d bytes, CRC-32 %08x): an export was interrupted "
    .. "between its two files, or the parameters were rewritten since; export the block again",
    par_path, sym_path, size, crc, sz, c)
end

---------------------------------------------------------------- SymbolBlock
local HybridBlock = block.HybridBlock
local SymbolBlock = HybridBlock:extend("SymbolBlock")
X.SymbolBlock = SymbolBlock

local function parse_shape(s)
  if type(s) ~= "string" then return nil end
  local t = SG.parse_shape(s)
  if t == nil or #t == 0 then return nil end
  return t
end

local function as_symbols(who, v, what, level)
  if sym.is_symbol(v) then return { v } end
  if type(v) ~= "table" or #v == 0 then
    error(who .. ": " .. what .. " must be a Symbol or a list of Symbols, got " .. type(v), level + 1)
  end
  for i, s in ipairs(v) do
    if not sym.is_symbol(s) then
      error(string.format("%s: %s[%d] must be a Symbol, got %s", who, what, i, type(s)), level + 1)
    end
  end
  return v
end

-- An initializer from a variable's __init__ attribute ("zeros", '["xavier", {...}]'); nil
-- when luamx cannot read it (initialize()'s default is used).
local function init_of(s)
  if s == nil then return nil end
  local ok, ini = pcall(initializer.create, s)
  if ok then return ini end
  return nil
end

-- SymbolBlock(outputs, inputs, params): outputs a Symbol (or a list: grouped), inputs
-- one variable Symbol or a list of them (the forward's arguments, in order), params an
-- optional ParameterDict or table name -> Parameter to share.
function SymbolBlock:__init(outputs, inputs, params, level)
  level = level or 3 -- __init, new_instance, the caller
  HybridBlock.__init(self)
  local who = "SymbolBlock"
  local outs = as_symbols(who, outputs, "outputs", level)
  if #outs > 1 then outputs = sym.Group(outs) else outputs = outs[1] end
  local ins = as_symbols(who, inputs, "inputs", level)
  local s = clone(outputs.outputs)
  rawset(self, "_sym", s)
  local order = s:_topo()
  local vars = {}
  for _, n in ipairs(order) do if n.op == nil then vars[n.name] = n end end
  local in_nodes, is_input = {}, {}
  for i, x in ipairs(ins) do
    local e = x.outputs
    if #e ~= 1 or e[1][1].op ~= nil then
      error(string.format("%s: inputs[%d] must be a variable (mx.sym.var), got %s", who, i,
        tostring(x)), level + 1)
    end
    local nm = e[1][1].name
    local node = vars[nm]
    if node == nil then
      error(string.format("%s: input '%s' is not a variable of the symbol (its variables: %s)",
        who, nm, table.concat(s:list_inputs(), ", ")), level + 1)
    end
    if is_input[node] then error(who .. ": input '" .. nm .. "' given twice", level + 1) end
    in_nodes[i], is_input[node] = node, true
  end
  rawset(self, "_in_nodes", in_nodes)
  local aux = SG.aux_set(order)
  local shared = params
  if shared ~= nil and type(shared) ~= "table" then
    error(who .. ": params must be a ParameterDict or a table name -> Parameter, got "
      .. type(shared), level + 1)
  end
  local pnodes = {}
  for _, n in ipairs(order) do
    if n.op == nil and not is_input[n] then
      local p = shared and (shared.get and shared:get(n.name) or shared[n.name])
      if p == nil then
        local a = n.attrs
        p = Parameter.new(n.name, {
          shape = parse_shape(a.__shape__),
          grad_req = aux[n] and "null" or "write",
          lr_mult = tonumber(a.__lr_mult__), wd_mult = tonumber(a.__wd_mult__),
          init = init_of(a.__init__),
        }, level + 1)
        if n.value ~= nil then p:set_data(n.value) end
      end
      pnodes[#pnodes + 1] = { node = n, p = p }
      self[n.name] = p
    end
  end
  rawset(self, "_pnodes", pnodes)
end

-- The shapes of the parameters, inferred from the inputs' (deferred initialisation).
local function infer_params(self, args)
  local pn = rawget(self, "_pnodes")
  local want = false
  for _, e in ipairs(pn) do if e.p._data == nil then want = true end end
  if not want then return end
  local given = {}
  for i, n in ipairs(rawget(self, "_in_nodes")) do
    if nd.is_tensor(args[i]) then given[n.name] = args[i]:shape() end
  end
  for _, e in ipairs(pn) do
    if e.p._data ~= nil then given[e.node.name] = e.p._data:shape() end
  end
  local s = rawget(self, "_sym")
  local a, _, x = s:infer_shape_partial(given)
  local shape = {}
  for i, nm in ipairs(s:list_arguments()) do shape[nm] = a[i] end
  for i, nm in ipairs(s:list_auxiliary_states()) do shape[nm] = x[i] end
  for _, e in ipairs(pn) do
    if e.p._data == nil then
      local sh = shape[e.node.name]
      if sh and #sh > 0 then e.p:set_shape(sh, 3) end
      e.p:_finish_deferred_init(3)
    end
  end
end

function SymbolBlock:forward(...)
  local n = select("#", ...)
  local ins = rawget(self, "_in_nodes")
  if n ~= #ins then
    local names = {}
    for i, nd_ in ipairs(ins) do names[i] = nd_.name end
    error(string.format("SymbolBlock: forward takes %d input(s) (%s), got %d", #ins,
      table.concat(names, ", "), n), 2)
  end
  local args = { ... }
  -- an input's __shape__ fixes its nonzero dims: export writes them for dims its graph's
  -- constants were computed from (MXNet 1.9.1's Gluon SymbolBlock does not check them)
  for i = 1, n do
    local want = parse_shape(ins[i].attrs.__shape__)
    local x = args[i]
    if want and nd.is_tensor(x) then
      local got = x:shape()
      for d = 1, #want do
        if #got ~= #want or (want[d] ~= 0 and got[d] ~= want[d]) then
          error(string.format("SymbolBlock: input '%s' has shape (%s), but the file fixes it to "
            .. "%s (its __shape__; 0: any size): the graph holds constants computed at that "
            .. "size", ins[i].name, table.concat(got, ", "), ins[i].attrs.__shape__), caller.level())
        end
      end
    end
  end
  infer_params(self, args)
  local vals = {}
  for i = 1, n do vals[ins[i]] = args[i] end
  for _, e in ipairs(rawget(self, "_pnodes")) do vals[e.node] = e.p:data() end
  local s = rawget(self, "_sym")
  local ok, outs = pcall(E._eval_dag, s, vals)
  if not ok then
    -- name the node: the whole graph's inference with these inputs and parameters
    local given = {}
    for node, v in pairs(vals) do if nd.is_tensor(v) then given[node.name] = v:shape() end end
    local iok, ierr = pcall(s.infer_shape_partial, s, given)
    local msg = tostring(iok and outs or ierr):gsub("^.-:%d+: ", "")
    error("SymbolBlock: " .. msg, 2)
  end
  return unpack(outs)
end

-- Loads an MXNet parameter file ("arg:"/"aux:" keys, or plain names) into the block:
-- every parameter must be there, nothing else, with fitting shapes.
function SymbolBlock:_load_params(path, ctx, level)
  local who = "SymbolBlock.imports"
  local ok, loaded = pcall(nd.load, path)
  if not ok then error(who .. ": " .. tostring(loaded), level + 1) end
  if loaded[1] ~= nil then
    error(who .. ": " .. path .. " holds an unnamed list of arrays, not a parameter file", level + 1)
  end
  local vals = {}
  local keys = {}
  for k in pairs(loaded) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local nm = k:match("^arg:(.*)$") or k:match("^aux:(.*)$") or k
    if vals[nm] ~= nil then error(who .. ": " .. path .. " holds '" .. nm .. "' twice", level + 1) end
    vals[nm] = loaded[k]
  end
  self:_set_params(vals, ctx, who, level + 1, path)
end

-- The parameters from vals (name -> NDArray: every parameter, nothing else), checked
-- against the symbol's shapes (path: where they came from, for messages).
function SymbolBlock:_set_params(vals, ctx, who, level, path)
  path = path or "the given parameters"
  local keys = {}
  for k in pairs(vals) do keys[#keys + 1] = k end
  table.sort(keys)
  local pn = rawget(self, "_pnodes")
  local mine = {}
  for _, e in ipairs(pn) do
    local nm = e.node.name
    mine[nm] = e
    if vals[nm] == nil then
      local ins = {}
      for i, n in ipairs(rawget(self, "_in_nodes")) do ins[i] = n.name end
      local hint = ""
      if not nm:find("_") or nm:match("^data%d*$") then
        hint = " (an input? input_names are: " .. table.concat(ins, ", ") .. ")"
      end
      error(string.format("%s: Parameter '%s' is missing in file '%s'%s", who, nm, path, hint),
        level + 1)
    end
  end
  for _, k in ipairs(keys) do
    local nm = k:match("^arg:(.*)$") or k:match("^aux:(.*)$") or k
    if not mine[nm] then
      local hint = ""
      for _, n in ipairs(rawget(self, "_in_nodes")) do
        if n.name == nm then hint = " (it is one of the input_names)" end
      end
      error(string.format("%s: Parameter '%s' loaded from file '%s' is not present in the "
        .. "symbol%s", who, nm, path, hint), level + 1)
    end
  end
  -- shapes: each against the parameter's known dims, then all together through inference
  local given = {}
  for _, e in ipairs(pn) do
    local nm, p = e.node.name, e.p
    local s = vals[nm]:shape()
    local okk = pcall(p.set_shape, p, s, 1)
    if not okk then
      error(string.format("%s: shape mismatch for Parameter '%s': the symbol expects %s, the "
        .. "file '%s' has %s", who, nm, Parameter._shape_str(p.shape), path,
        Parameter._shape_str(s)), level + 1)
    end
    given[nm] = s
  end
  local s = rawget(self, "_sym")
  local okk, err = pcall(s.infer_shape_partial, s, given)
  if not okk then
    error(string.format("%s: the parameter shapes in '%s' do not fit the symbol: %s", who, path,
      tostring(err):gsub("^.-:%d+: ", "")), level + 1)
  end
  for _, e in ipairs(pn) do
    local v = vals[e.node.name]
    if v:dtype() ~= e.p.dtype then e.p:cast(v:dtype()) end
    if ctx ~= nil then
      e.p._data = nil
      e.p._deferred = { ctx = ctx }
    end
    e.p:set_data(ctx ~= nil and v:to(ctx) or v)
  end
end

-- SymbolBlock.imports(symbol_file, input_names, param_file, {ctx=}): input_names a
-- string or a list of strings.
function SymbolBlock.imports(symbol_file, input_names, param_file, opts)
  local who = "SymbolBlock.imports"
  if type(symbol_file) ~= "string" then
    error(who .. ": symbol_file must be a string, got " .. type(symbol_file), 2)
  end
  if type(input_names) == "string" then input_names = { input_names } end
  if type(input_names) ~= "table" or #input_names == 0 then
    error(who .. ": input_names must be a string or a list of strings", 2)
  end
  if param_file ~= nil and type(param_file) ~= "string" then
    error(who .. ": param_file must be a string or nil, got " .. type(param_file), 2)
  end
  if opts ~= nil and type(opts) ~= "table" then error(who .. ": options must be a table", 2) end
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "ctx" then error(who .. ": unknown option '" .. tostring(k) .. "' (valid: ctx)", 2) end
  end
  local ctx = opts.ctx
  if ctx ~= nil then
    local ok, err = pcall(context.parse, ctx)
    if not ok then error(who .. ": ctx: " .. tostring(err):gsub("^.-:%d+: ", ""), 2) end
  end
  local ok, s = pcall(sym.load, symbol_file)
  if not ok then error(who .. ": " .. tostring(s):gsub("^.-:%d+: ", ""), 2) end
  local inputs = {}
  local have = {}
  for _, nm in ipairs(s:list_inputs()) do have[nm] = true end
  for i, nm in ipairs(input_names) do
    if type(nm) ~= "string" then error(who .. ": input_names[" .. i .. "] must be a string", 2) end
    if not have[nm] then
      error(string.format("%s: input '%s' is not a variable of %s (its variables: %s)", who, nm,
        symbol_file, table.concat(s:list_inputs(), ", ")), 2)
    end
    inputs[i] = sym.var(nm)
  end
  local b = SymbolBlock(s, inputs)
  if param_file ~= nil then
    local f = io.open(symbol_file, "rb")
    local js = f and f:read("*a")
    if f then f:close() end
    local why = js and X._params_mismatch(js, symbol_file, param_file)
    if why then error(who .. ": " .. why, 2) end
    b:_load_params(param_file, ctx, 2)
  end
  return b
end

return X
