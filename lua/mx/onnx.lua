-- mx.onnx — ONNX models in and out, as MXNet 1.9's mx.onnx (docs/onnx.md):
--   local sym, arg_params, aux_params = mx.onnx.import_model("resnet50.onnx")
--   local net = mx.onnx.import_to_gluon("resnet50.onnx", { ctx = mx.cpu() })
--   local meta = mx.onnx.get_model_metadata("resnet50.onnx")
-- The reading and the conversion to luamx's graph are C (core/src/onnx/, mx_onnx_import),
-- so the C runtime imports the same way; this module turns the graph into a Symbol and
-- parameter tables.
local lib = require("mx.core.lib")
local nd = require("mx.nd")
local sym = require("mx.symbol")
local SG = require("mx.graph.symbol_graph")
local S = require("mx.onnx_strings")

local ffi, C = lib.ffi, lib.C
local ffi_string = ffi.string

local M = {}

local inputs_t = ffi.typeof("mx_onnx_input[?]")

local function check_path(who, path, level)
  if type(path) ~= "string" then
    error(who .. ": model_file must be a string, got " .. type(path), level + 1)
  end
end

local OPTS = { input_shapes = true, input_types = true, constants = true, ctx = true }

-- The C graph of the model and its output names. opts.input_shapes = {name = {dims}}
-- (-1: unknown), opts.input_types = {name = dtype}, opts.constants = {name = NDArray}
-- (inputs taken as constants: what makes a shape input of Reshape static).
function M._import_graph(who, path, opts, level)
  check_path(who, path, level + 1)
  opts = opts or {}
  if type(opts) ~= "table" then error(who .. ": options must be a table", level + 1) end
  for k in pairs(opts) do
    if not OPTS[k] then error(who .. ": unknown option '" .. tostring(k) .. "'", level + 1) end
  end
  local names = {}
  for _, t in ipairs { opts.input_shapes or {}, opts.input_types or {}, opts.constants or {} } do
    for k in pairs(t) do
      if type(k) ~= "string" then error(who .. ": input names must be strings", level + 1) end
      names[k] = true
    end
  end
  local list = {}
  for k in pairs(names) do list[#list + 1] = k end
  table.sort(list)
  local arr = inputs_t(math.max(#list, 1))
  local keep = {}
  for i, name in ipairs(list) do
    local e = arr[i - 1]
    e.name = name
    e.desc.ndim = -1
    e.desc.dtype = -1
    e.desc.dev_type = 1
    local shape = opts.input_shapes and opts.input_shapes[name]
    if shape ~= nil then
      if type(shape) ~= "table" or #shape > 8 then
        error(who .. ": input_shapes['" .. name .. "'] must be a list of at most 8 dims", level + 1)
      end
      e.desc.ndim = #shape
      for d = 1, #shape do e.desc.shape[d - 1] = shape[d] >= 0 and shape[d] or -1 end
    end
    local dt = opts.input_types and opts.input_types[name]
    if dt ~= nil then
      local code = nd.dtype_code(dt)
      if not code then error(who .. ": input_types['" .. name .. "']: unknown dtype", level + 1) end
      e.desc.dtype = code
    end
    local v = opts.constants and opts.constants[name]
    if v ~= nil then
      if not nd.is_tensor(v) then
        error(who .. ": constants['" .. name .. "'] must be an NDArray", level + 1)
      end
      e.value = v.h
      keep[#keep + 1] = v
    end
  end
  local gp, pn, pnames = ffi.new("mx_graph*[1]"), ffi.new("int[1]"), ffi.new("char**[1]")
  if C.mx_onnx_import(path, #list, arr, gp, pn, pnames) ~= 0 then
    error(who .. ": " .. ffi_string(C.mx_last_error()), level + 1)
  end
  local g = ffi.gc(gp[0], C.mx_graph_free)
  local outs = {}
  for i = 0, pn[0] - 1 do
    outs[i + 1] = ffi_string(pnames[0][i])
    C.mx_free(pnames[0][i])
  end
  C.mx_free(pnames[0])
  return g, outs, keep
end

-- import_model(model_file, {input_shapes=, input_types=, constants=}) -> sym, arg_params,
-- aux_params (MXNet 1.9's): the parameters are the model's initializers (and values
-- computed from them at import time), by name; sym's free variables are the inputs.
function M.import_model(model_file, opts)
  local g = M._import_graph("mx.onnx.import_model", model_file, opts, 2)
  local s = sym._from_graph(g)
  local order = s:_topo()
  local aux = SG.aux_set(order)
  local args, auxs = {}, {}
  for _, n in ipairs(order) do
    if n.op == nil and n.value ~= nil then
      if aux[n] then auxs[n.name] = n.value else args[n.name] = n.value end
      n.value = nil
    end
  end
  return s, args, auxs
end

-- import_to_gluon(model_file, {ctx=, input_shapes=...}) -> a SymbolBlock whose inputs
-- are the model's inputs in order, with the parameters loaded.
function M.import_to_gluon(model_file, opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("mx.onnx.import_to_gluon: options must be a table", 2) end
  local ctx = opts.ctx
  local rest = {}
  for k, v in pairs(opts) do if k ~= "ctx" then rest[k] = v end end
  local iok, s, args, auxs = pcall(M.import_model, model_file, rest)
  if not iok then -- at the caller's line
    local msg = tostring(s):gsub("^[^\n]-:%d+: ", ""):gsub("^mx%.onnx%.import_model: ", "")
    error("mx.onnx.import_to_gluon: " .. msg, 2)
  end
  local params = {}
  for k, v in pairs(args) do params[k] = v end
  for k, v in pairs(auxs) do params[k] = v end
  local inputs = {}
  for _, name in ipairs(s:list_inputs()) do
    if params[name] == nil then inputs[#inputs + 1] = sym.var(name) end
  end
  local SymbolBlock = require("mx.gluon").SymbolBlock
  local b = SymbolBlock(s, inputs)
  b:_set_params(params, ctx, "mx.onnx.import_to_gluon", 2)
  return b
end

local function descs(n, names, ds)
  local out = {}
  for i = 0, n - 1 do
    local d = ds[i]
    local shape = {}
    for k = 0, d.ndim - 1 do shape[k + 1] = tonumber(d.shape[k]) end
    local dt = d.dtype >= 0 and nd.dtype_name[d.dtype] or d.dtype == C.MX_ONNX_STRING and "string" or nil
    out[i + 1] = { ffi_string(names[i]), shape, dt }
    C.mx_free(names[i])
  end
  C.mx_free(names)
  C.mx_free(ds)
  return out
end

-- get_model_metadata(model_file) -> {input_tensor_data = {{name, shape, dtype}, ...},
-- output_tensor_data = {...}} (MXNet's, plus the dtype); unknown dims are -1.
function M.get_model_metadata(model_file)
  check_path("mx.onnx.get_model_metadata", model_file, 2)
  local ni, inames, idescs = ffi.new("int[1]"), ffi.new("char**[1]"), ffi.new("mx_desc*[1]")
  local no, onames, odescs = ffi.new("int[1]"), ffi.new("char**[1]"), ffi.new("mx_desc*[1]")
  if C.mx_onnx_model_info(model_file, ni, inames, idescs, no, onames, odescs) ~= 0 then
    error("mx.onnx.get_model_metadata: " .. ffi_string(C.mx_last_error()), 2)
  end
  return { input_tensor_data = descs(ni[0], inames[0], idescs[0]),
    output_tensor_data = descs(no[0], onames[0], odescs[0]) }
end

---------------------------------------------------------------- sessions
-- load_model(model_file, {input_shapes=, input_types=, constants=, optimize=true}) -> a
-- session compiled for those shapes, as ONNX Runtime's InferenceSession: sess:run({name =
-- NDArray}) -> the outputs (a list, the model's order); sess.input_names,
-- sess.output_names. It runs the C graph executor (the same path as the C runtime) with
-- the graph passes (fusion, constant folding) unless optimize = false. Inputs keep the
-- shapes the session was made for.
local Session = {}
Session.__index = Session

-- A model whose inputs and outputs are all strings (a graph of string ops, docs/onnx.md
-- "Strings") runs on string tensors: its session's run takes and gives mx.onnx.strings
-- values. One mixing strings with numbers goes to the importer, which refuses it.
local function string_names(model_file)
  local meta = M.get_model_metadata(model_file)
  local ins, outs, all = {}, {}, true
  for _, d in ipairs(meta.input_tensor_data) do
    ins[#ins + 1] = d[1]
    all = all and d[3] == "string"
  end
  for _, d in ipairs(meta.output_tensor_data) do
    outs[#outs + 1] = d[1]
    all = all and d[3] == "string"
  end
  if all and #outs > 0 then return ins, outs end
end

function M.load_model(model_file, opts)
  opts = opts or {}
  check_path("mx.onnx.load_model", model_file, 2)
  local mok, sin, sout = pcall(string_names, model_file) -- else the import says what is wrong
  if mok and sin then
    for k in pairs(opts) do
      if k ~= "optimize" and k ~= "input_shapes" and k ~= "input_types" then
        error("mx.onnx.load_model: option '" .. tostring(k) .. "' does not apply to a model of "
          .. "string ops", 2)
      end
    end
    return S.session(model_file, sin, sout)
  end
  local rest, optimize = {}, opts.optimize ~= false
  for k, v in pairs(opts) do if k ~= "optimize" then rest[k] = v end end
  local g, outs, keep = M._import_graph("mx.onnx.load_model", model_file, rest, 2)
  local names = {}
  for i = 0, C.mx_graph_num_nodes(g) - 1 do
    if C.mx_graph_node_op(g, i) == -1 and C.mx_graph_node_value(g, i) == nil then
      names[#names + 1] = ffi_string(C.mx_graph_node_name(g, i))
    end
  end
  local in_descs = ffi.new("mx_desc[?]", math.max(#names, 1))
  local shapes = rest.input_shapes or {}
  local types = rest.input_types or {}
  for k, name in ipairs(names) do
    local s = shapes[name]
    if s == nil then
      error("mx.onnx.load_model: give input_shapes['" .. name .. "'] (the session is compiled for "
        .. "one signature)", 2)
    end
    local d = in_descs[k - 1]
    d.ndim, d.layout, d.dev_type, d.dev_id = #s, 0, 1, 0
    for j = 1, #s do d.shape[j - 1] = s[j] end
    d.dtype = nd.dtype_code(types[name] or "float32")
  end
  local flags = C.MX_GRAPH_STATIC_ALLOC + (optimize and (C.MX_GRAPH_OPTIMIZE + C.MX_GRAPH_FOLD_BN) or 0)
  local ep = ffi.new("mx_graph_exec*[1]")
  if C.mx_graph_exec_new(g, #names, in_descs, flags, ep) ~= 0 then
    error("mx.onnx.load_model: " .. ffi_string(C.mx_last_error()), 2)
  end
  local s = setmetatable({ _g = g, _e = ffi.gc(ep[0], C.mx_graph_exec_free), _keep = keep,
    input_names = names, output_names = outs }, Session)
  s._in = ffi.new("mx_tensor*[?]", math.max(#names, 1))
  s._nout = C.mx_graph_exec_num_outputs(s._e)
  s._out = ffi.new("mx_tensor*[?]", math.max(s._nout, 1))
  return s
end

function Session:run(inputs)
  if type(inputs) ~= "table" then error("run: inputs must be a table name -> NDArray", 2) end
  for k, name in ipairs(self.input_names) do
    local v = inputs[name]
    if not nd.is_tensor(v) then error("run: no NDArray for input '" .. name .. "'", 2) end
    self._in[k - 1] = v.h -- `inputs` keeps v alive through the run
  end
  for k = 0, self._nout - 1 do self._out[k] = nil end
  if C.mx_graph_exec_run(self._e, #self.input_names, self._in, self._nout, self._out) ~= 0 then
    error("run: " .. ffi_string(C.mx_last_error()), 2)
  end
  local res = {}
  for k = 0, self._nout - 1 do res[k + 1] = nd._wrap(self._out[k]) end
  return res
end

---------------------------------------------------------------- export
-- export_model(sym, params, {in_shapes=, in_types="float32", onnx_file_path="model.onnx",
-- dynamic=false}) -> onnx_file_path (MXNet 1.9's): sym a Symbol or a symbol JSON file,
-- params a table name -> NDArray ("arg:"/"aux:" prefixes allowed) or a .params file;
-- in_shapes the shapes of sym's inputs that params does not give, in list_inputs order;
-- in_types one dtype or one per input; dynamic: the first dim of the inputs and outputs is
-- symbolic. An op with no ONNX form is an error naming the node and the op.
local EXPORT_OPTS = { in_shapes = true, in_types = true, onnx_file_path = true, dynamic = true,
  dynamic_input_shapes = true, verbose = true }

function M.export_model(s, params, opts)
  local who = "mx.onnx.export_model"
  opts = opts or {}
  if type(opts) ~= "table" then error(who .. ": options must be a table", 2) end
  for k in pairs(opts) do
    if not EXPORT_OPTS[k] then error(who .. ": unknown option '" .. tostring(k) .. "'", 2) end
  end
  local function load(f, x) -- a file's error at the caller's line
    local lok, r = pcall(f, x)
    if not lok then error(who .. ": " .. tostring(r):gsub("^[^\n]-:%d+: ", ""), 3) end
    return r
  end
  if type(s) == "string" then s = load(sym.load, s) end
  if type(s) ~= "table" or not s.list_inputs then error(who .. ": sym must be a Symbol or a file", 2) end
  if type(params) == "string" then params = load(nd.load, params) end
  if type(params) ~= "table" then error(who .. ": params must be a table or a .params file", 2) end
  local vals = {}
  for k, v in pairs(params) do
    local name = type(k) == "string" and (k:match("^arg:(.*)$") or k:match("^aux:(.*)$") or k)
    if not name or not nd.is_tensor(v) then error(who .. ": params must map names to NDArrays", 2) end
    vals[name] = v
  end
  local path = opts.onnx_file_path or "model.onnx"
  local shapes = opts.in_shapes or opts.dynamic_input_shapes or {}
  if type(shapes) ~= "table" then error(who .. ": in_shapes must be a list of shapes", 2) end
  local g, map = SG.lower(s.outputs, 2)
  local data = {}
  for _, id in ipairs(map.inputs) do
    local name = ffi_string(C.mx_graph_node_name(g, id))
    local v = vals[name]
    if v ~= nil then
      if C.mx_graph_set_value(g, id, v.h) ~= 0 then error(who .. ": " .. ffi_string(C.mx_last_error()), 2) end
    elseif C.mx_graph_node_value(g, id) == nil then
      data[#data + 1] = name
    end
  end
  if #shapes ~= #data then
    error(string.format("%s: in_shapes gives %d shapes for the %d inputs (%s)", who, #shapes, #data,
      table.concat(data, ", ")), 2)
  end
  local dd = ffi.new("mx_desc[?]", math.max(#data, 1))
  local types = opts.in_types or "float32"
  for i = 1, #data do
    local sh = shapes[i]
    if type(sh) ~= "table" or #sh > 8 then error(who .. ": in_shapes[" .. i .. "] must be a shape", 2) end
    local d = dd[i - 1]
    d.ndim, d.layout, d.dev_type, d.dev_id = #sh, 0, 1, 0
    for j = 1, #sh do d.shape[j - 1] = (type(sh[j]) == "number" and sh[j] > 0) and sh[j] or 1 end
    local dt = type(types) == "table" and types[i] or types
    local code = nd.dtype_code(dt)
    if not code then error(who .. ": in_types: unknown dtype " .. tostring(dt), 2) end
    d.dtype = code
  end
  local flags = opts.dynamic and C.MX_ONNX_DYNAMIC or 0
  if C.mx_onnx_export(g, #data, dd, flags, path) ~= 0 then error(ffi_string(C.mx_last_error()), 2) end
  return path
end

-- HybridBlock:export_onnx's work: the block's traced graph (traced on zeros of
-- input_shapes when it has none) through export and export_model.
function M.export_block(block, path, opts, level)
  local who = "export_onnx"
  level = level or 1
  if type(block) ~= "table" or not block.__is_hybrid then
    error(who .. ": block must be a HybridBlock, got " .. type(block), level + 1)
  end
  opts = opts or {}
  if type(opts) ~= "table" then error(who .. ": options must be a table", level + 1) end
  if type(path) ~= "string" then error(who .. ": path must be a string", level + 1) end
  local shapes = opts.input_shapes
  if type(shapes) ~= "table" or #shapes == 0 then
    error(who .. ": give input_shapes = {shape, ...} (one per forward argument)", level + 1)
  end
  if type(shapes[1]) == "number" then shapes = { shapes } end
  if not rawget(block, "_active") then block:hybridize() end
  local xs = {}
  for i, sh in ipairs(shapes) do xs[i] = nd.zeros(sh) end
  block(unpack(xs))
  local tmp = os.tmpname()
  local ok, sf, pf = pcall(block.export, block, tmp)
  os.remove(tmp)
  if not ok then error(who .. ": " .. tostring(sf), level + 1) end
  local ok2, err = pcall(M.export_model, sf, pf, { in_shapes = shapes, onnx_file_path = path,
    dynamic = opts.dynamic })
  os.remove(sf)
  os.remove(pf)
  if not ok2 then error(who .. ": " .. tostring(err), level + 1) end
  return path
end

-- load_tensor(path) -> NDArray (or a string tensor for STRING data), name: a serialized
-- TensorProto (ONNX's test data).
function M.load_tensor(path)
  check_path("mx.onnx.load_tensor", path, 2)
  local out, name = ffi.new("mx_tensor*[1]"), ffi.new("char*[1]")
  if C.mx_onnx_load_tensor(path, out, name) ~= 0 then
    local msg = ffi_string(C.mx_last_error())
    if msg:find("element type STRING", 1, true) then
      local t, nm = S.load(path)
      if t then return t, nm end
      msg = nm
    end
    error("mx.onnx.load_tensor: " .. msg, 2)
  end
  local s = ffi_string(name[0])
  C.mx_free(name[0])
  return nd._wrap(out[0]), s
end

-- save_tensor(path, t, name): t (an NDArray or a string tensor) as a serialized
-- TensorProto, written atomically; name defaults to "".
function M.save_tensor(path, t, name)
  local who = "mx.onnx.save_tensor"
  check_path(who, path, 2)
  if name ~= nil and type(name) ~= "string" then error(who .. ": name must be a string", 2) end
  if S.is_strings(t) then
    local ok, msg = S.save(path, t, name)
    if not ok then error(who .. ": " .. msg, 2) end
    return
  end
  if not nd.is_tensor(t) then error(who .. ": t must be an NDArray or a string tensor", 2) end
  if C.mx_onnx_save_tensor(path, t.h, nil, name) ~= 0 then
    error(who .. ": " .. ffi_string(C.mx_last_error()), 2)
  end
end

-- strings(values, shape) -> a string tensor (ONNX's tensor(string); mx.onnx_strings).
function M.strings(values, shape)
  local t = S.new(values, shape, "mx.onnx.strings", 2) -- (no tail call: its level is ours)
  return t
end
M.is_strings = S.is_strings

return M
