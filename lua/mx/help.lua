-- mx.help — documentation at the REPL.
--
--   mx.help(mx.nd.add)    mx.help("add")    mx.help(x.sum)   -- an op: its doc from
--                                      -- the op table, inputs, params, defaults
--   mx.help(mx.gluon.nn.Dense)         -- a Lua function or class: the comment
--                                      -- block above its definition in the source
--   mx.help(x)                         -- a tensor: shape, dtype, device, methods
--   mx.help(mx.nd)                     -- a module table: its functions
--
-- mx.help prints the text; mx.help.text(obj) returns it instead.
local lib = require("mx.core.lib")
local nd = require("mx.nd")

local type, tostring, format = type, tostring, string.format

local M = {}

local function dtypes_text(op)
  local ds = op.dtypes or "all"
  if type(ds) == "string" then return ds end
  local names = {}
  for _, c in ipairs(ds) do names[#names + 1] = tostring(c) end
  return table.concat(names, ", ")
end

local function default_text(p)
  if p.default == nil then return "optional" end
  local d = p.default
  if type(d) == "table" then
    local parts = {}
    for i = 1, #d do parts[i] = tostring(d[i]) end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  if type(d) == "string" then return format("%q", d) end
  if p.type == "dtype" and type(d) == "number" then
    return format("%q", nd.dtype_name[d] or tostring(d))
  end
  return tostring(d)
end

local TYPE_NOTE = {
  axis = "axis, 1-based, negative from the end", axes = "axes, 1-based",
  shape = "shape", ints = "list of integers", dtype = "dtype name",
}

-- The backends whose kernels this process has for op (mx_op_backends: dnnl in builds with
-- oneDNN, cuda once libmx_cuda is loaded), the declared but absent ones in brackets.
function M.kernels_text(op)
  local C, bit = lib.C, require("bit")
  local have = C.mx_op_backends(op.id)
  local declared = require("mx.core.opgen").kernels_of(op)
  local parts = {}
  for b, name in ipairs({ "ref", "cpu", "dnnl", "cuda" }) do
    if declared[name] then
      parts[#parts + 1] = bit.band(have, bit.lshift(1, b - 1)) ~= 0 and name or ("[" .. name .. "]")
    end
  end
  return table.concat(parts, ", ")
end

-- Help text for one op of the op table.
function M.op_text(op)
  local ins = {}
  for i, n in ipairs(op.inputs) do ins[i] = n end
  if op.variadic then ins = { (ins[1] or "data") .. "1", (ins[1] or "data") .. "2", "..." } end
  local opt = {}
  for _, p in ipairs(op.params) do opt[#opt + 1] = p.name .. "=" end
  if op.ctx then opt[#opt + 1] = "ctx=" end
  opt[#opt + 1] = "out="
  local sig = op.ctx and format("mx.nd.%s(shape, {%s})", op.name, table.concat(opt, ", "))
    or format("mx.nd.%s(%s, {%s})", op.name, table.concat(ins, ", "), table.concat(opt, ", "))
  local lines = { sig, "", "  " .. op.doc, "" }
  if #op.inputs > 0 then
    lines[#lines + 1] = "  inputs:  " .. table.concat(op.inputs, ", ")
      .. (op.variadic and " (any number)" or "") .. "   dtypes: " .. dtypes_text(op)
  end
  if #op.params > 0 then
    lines[#lines + 1] = "  options:"
    for _, p in ipairs(op.params) do
      local t = p.type == "enum" and ("one of " .. table.concat(p.values, "/"))
        or (TYPE_NOTE[p.type] or p.type)
      lines[#lines + 1] = format("    %-12s %s, default %s%s", p.name, t, default_text(p),
        p.doc and (" — " .. p.doc) or "")
    end
  end
  if op.nout then -- a C function of the params gives the count (topk)
    lines[#lines + 1] = "  outputs: " .. table.concat(op.outputs, ", ") .. " (how many: "
      .. op.num_outputs .. ")"
  elseif op.nout_param then
    lines[#lines + 1] = "  outputs: " .. op.num_outputs .. " tensors (the param's value)"
  elseif #op.outputs > 1 then
    lines[#lines + 1] = "  outputs: " .. table.concat(op.outputs, ", ")
  end
  local extras = {}
  if not op.ctx and op.nin ~= 0 then extras[#extras + 1] = "method x:" .. op.name .. "(...)" end
  if op.scalar then
    extras[#extras + 1] = "with a number: " .. op.scalar.op
      .. (op.scalar.rop ~= op.scalar.op and (" / " .. op.scalar.rop) or "")
  end
  extras[#extras + 1] = op.nondiff and "no gradient" or "differentiable"
  lines[#lines + 1] = "  also:    " .. table.concat(extras, "; ")
  lines[#lines + 1] = "  kernels: " .. M.kernels_text(op)
  return table.concat(lines, "\n")
end

-- The op a function implements (mx.nd.<op>, a method, or a reference wrapper).
local function op_of_function(f)
  for _, op in ipairs(lib.ops) do
    if nd[op.name] == f or (nd._ref and nd._ref[op.name] == f) then return op end
  end
  return nil
end

-- The comment block right above line `line` of `file` (a function's doc).
local function comment_above(file, line)
  local f = io.open(file, "r")
  if not f then return nil end
  local lines = {}
  for l in f:lines() do
    lines[#lines + 1] = l
    if #lines >= line then break end
  end
  f:close()
  local doc = {}
  local i = line - 1
  -- stop at a section divider ("-------- name")
  while i >= 1 and lines[i]:match("^%s*%-%-") and not lines[i]:match("^%s*%-%-%-%-") do
    table.insert(doc, 1, (lines[i]:gsub("^%s*%-%-+ ?", "")))
    i = i - 1
  end
  local def = lines[line] and lines[line]:gsub("^%s+", "") or nil
  return doc, def
end

-- The comment block that opens a file (a module's or class's overview).
local function file_header(file)
  local f = io.open(file, "r")
  if not f then return nil end
  local doc = {}
  for l in f:lines() do
    if not l:match("^%-%-") then break end
    doc[#doc + 1] = (l:gsub("^%-%-+ ?", ""))
  end
  f:close()
  return doc
end

local function function_text(f, name, header_fallback)
  local info = debug.getinfo(f, "S")
  if info.what == "C" then return (name or "function") .. ": a built-in (C) function" end
  local file = info.source:match("^@(.*)$")
  if not file then return (name or "function") .. ": defined in a string chunk" end
  local doc, def = comment_above(file, info.linedefined)
  if header_fallback and (not doc or #doc == 0) then doc = file_header(file) end
  local out = { def or (name or "function"), "  (" .. file .. ":" .. info.linedefined .. ")" }
  if doc and #doc > 0 then
    out[#out + 1] = ""
    for _, l in ipairs(doc) do out[#out + 1] = "  " .. l end
  else
    out[#out + 1] = "  (no comment above the definition)"
  end
  return table.concat(out, "\n")
end

local function sorted_keys(t, pred)
  local keys = {}
  for k, v in pairs(t) do
    if type(k) == "string" and not k:match("^_") and pred(v) then keys[#keys + 1] = k end
  end
  table.sort(keys)
  return keys
end

local function wrap_list(words, indent, width)
  local lines, cur = {}, indent
  for _, w in ipairs(words) do
    if #cur + #w + 1 > width and cur ~= indent then
      lines[#lines + 1] = cur
      cur = indent
    end
    cur = cur .. (cur == indent and "" or " ") .. w
  end
  if cur ~= indent then lines[#lines + 1] = cur end
  return table.concat(lines, "\n")
end

local function tensor_text(x)
  local methods = sorted_keys(nd.NDArray, function(v) return type(v) == "function" end)
  return format("NDArray of shape (%s), %s, on %s\n\n  methods:\n%s\n\n  mx.help(x.<method>) for one "
    .. "of them; rows: x[i] (1-based), ranges: x[{{a, b}}]", table.concat(x:shape(), ", "),
    x:dtype(), tostring(x:context()), wrap_list(methods, "    ", 78))
end

-- The comment above the line that defines class `name` in file (`local Name =`,
-- `Name = ...`, or `...extend("Name")`), when the constructor itself has none.
local function class_comment(file, name)
  local f = io.open(file, "r")
  if not f then return nil end
  local n, hit = 0, nil
  local pats = { "^%s*local%s+" .. name .. "%s*=", "^%s*" .. name .. "%s*=",
    "extend%([\"']" .. name .. "[\"']%)" }
  for l in f:lines() do
    n = n + 1
    for _, p in ipairs(pats) do
      if l:find(p) then hit = n break end
    end
    if hit then break end
  end
  f:close()
  if not hit then return nil end
  local doc = comment_above(file, hit)
  return doc and #doc > 0 and doc or nil
end

local function table_text(t)
  local mt = getmetatable(t)
  local cname = rawget(t, "_class_name") or rawget(t, "__name")
    or (type(mt) == "table" and (rawget(mt, "_class_name") or rawget(mt, "__name")))
  local ctor = type(rawget(t, "new")) == "function" and rawget(t, "new")
    or type(rawget(t, "__init")) == "function" and rawget(t, "__init")
    or (type(mt) == "table" and type(rawget(mt, "__call")) == "function" and rawget(mt, "__call"))
  local out = {}
  if cname and ctor then
    local info = debug.getinfo(ctor, "S")
    local file = info.source:match("^@(.*)$")
    local doc, def
    if file then doc, def = comment_above(file, info.linedefined) end
    if file and (not doc or #doc == 0) then
      doc = class_comment(file, cname) or file_header(file)
    end
    out[#out + 1] = cname .. (def and ("  —  " .. def) or "")
    if file then out[#out + 1] = "  (" .. file .. ":" .. info.linedefined .. ")" end
    if doc and #doc > 0 then
      out[#out + 1] = ""
      for _, l in ipairs(doc) do out[#out + 1] = "  " .. l end
    end
    out[#out + 1] = ""
  end
  local fns = sorted_keys(t, function(v) return type(v) == "function" end)
  local subs = sorted_keys(t, function(v) return type(v) == "table" end)
  if #fns > 0 then out[#out + 1] = "  functions:\n" .. wrap_list(fns, "    ", 78) end
  if #subs > 0 then out[#out + 1] = "  tables:\n" .. wrap_list(subs, "    ", 78) end
  if #out == 0 then return "a table with no public functions" end
  return table.concat(out, "\n")
end

-- Help text for obj (see the header).
local OVERVIEW = [[
mx.help(obj) explains obj:
  mx.help(mx.nd.add), mx.help("add"), mx.help(x.sum)   an op: doc, inputs, options
  mx.help(mx.gluon.nn.Dense), mx.help(some_function)    a class or Lua function
  mx.help(x)                                            a tensor: shape, dtype, methods
  mx.help(mx.nd), mx.help(mx.gluon)                     a module: its contents
Namespaces: mx.nd (tensors and ops), mx.autograd, mx.gluon (nn, loss, data, Trainer,
metric), mx.optimizer, mx.init, mx.random, mx.engine, mx.progress.
Guides: docs/getting-started.md, docs/mxnet-differences.md, docs/ops.md.]]

function M.text(obj)
  if obj == nil then return OVERVIEW end
  if type(obj) == "string" then
    local op = lib.ops_by_name[obj]
    if op then return M.op_text(op) end
    local f = nd[obj] or nd.NDArray[obj]
    if type(f) == "function" then return function_text(f, "mx.nd." .. obj) end
    return format("no op or mx.nd function named %q; mx.help(mx.nd) lists them", obj)
  end
  if type(obj) == "function" then
    local op = op_of_function(obj)
    if op then return M.op_text(op) end
    return function_text(obj)
  end
  if nd.is_tensor(obj) then return tensor_text(obj) end
  if type(obj) == "table" then
    if getmetatable(obj) and getmetatable(obj).__call and not next(obj) then
      return "a callable object"
    end
    return table_text(obj)
  end
  return format("a %s: %s", type(obj), tostring(obj))
end

setmetatable(M, {
  __call = function(_, obj)
    print(M.text(obj))
  end,
})

return M
