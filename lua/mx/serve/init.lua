-- mx.serve — what mx-serve's handlers are written with (docs/serving.md "Handlers").
--
-- A handler is a Lua module (handler.lua in the archive, or a built-in one) returning a
-- class made with serve.Handler:extend(name); each worker process makes one instance.
-- Per batch the worker calls, in order,
--   handler:preprocess(requests) -> batch      (requests: list of serve.Request)
--   handler:inference(batch)     -> outputs    (default: the model's forward)
--   handler:postprocess(outputs) -> answers    (one per request still live, in order)
-- after handler:initialize(ctx) once. A request refused on its own (bad input) is
-- answered with req:fail(status, message) in preprocess and leaves the batch; an error
-- raised anywhere fails the whole batch: serve.error(status, message) with that status,
-- anything else with 500 and its message. The worker keeps serving either way.
--
-- The defaults run tensors: JSON bodies (a nested array, {"instances": [...]},
-- {"inputs": ...}, {"<input name>": ...} or {"data": ...}) and KServe v2 tensors are
-- checked against the archive's signature, concatenated along the batch axis, run, and
-- split back per request. Subclasses override the per-request steps tensors_of(req) and
-- answer_of(req, outputs) (the image classifier does) or the batch steps themselves.
local class = require("mx.core.class")

local M = {}
local json
local function J()
  json = json or require("mx.serve.json")
  return json
end

---------------------------------------------------------------- errors
local ClientError = { __name = "mx.serve.error" }
ClientError.__index = ClientError
ClientError.__tostring = function(e) return e.message end

-- error(status, message[, level]): fails the batch with this HTTP status.
function M.error(status, message, level)
  error(setmetatable({ status = status, message = message }, ClientError), (level or 1) + 1)
end
function M.is_error(e) return getmetatable(e) == ClientError end

---------------------------------------------------------------- answers
local Response = { __name = "mx.serve.response" }
Response.__index = Response
-- response{status=200, body=<string> | json=<value>, content_type=, precision=9}
function M.response(t)
  if type(t) ~= "table" then error("serve.response: expected a table", 2) end
  return setmetatable(t, Response)
end

---------------------------------------------------------------- requests
local Request = class.base("Request")
M.Request = Request

local function sub(blob, off, len) return blob:sub(off + 1, off + len) end

function Request.new(meta, blob, index)
  local r = setmetatable({ index = index, id = meta.id, kind = meta.kind or "predict",
    content_type = meta.content_type or "", headers = meta.headers or {},
    query = meta.query or {} }, Request)
  if r.kind == "v2" then
    r.inputs = {}
    for k, t in ipairs(meta.inputs or {}) do
      r.inputs[k] = { name = t.name, datatype = t.datatype, dtype = t.dtype, shape = t.shape,
        off = t.off, len = t.len }
      r.inputs[t.name] = r.inputs[k]
    end
    r.outputs = meta.outputs
    r.parameters = meta.parameters
    r._blob = blob
  elseif meta.parts then
    r.parts = {}
    for k, p in ipairs(meta.parts) do
      local part = { name = p.name, filename = p.filename, content_type = p.content_type,
        body = sub(blob, p.off, p.len) }
      r.parts[k] = part
      if r.parts[p.name] == nil then r.parts[p.name] = part end
    end
    local main = r.parts.data or r.parts.body or r.parts.file or r.parts[1]
    r.body = main and main.body or ""
  else
    r.body = blob
  end
  return r
end

-- The body as JSON (cached); a 400 naming the problem when it is not JSON.
function Request:json()
  if self._json == nil then
    local v, err = J().decode(self.body or "")
    if v == nil then M.error(400, "the request body is " .. err, 2) end
    self._json = v
  end
  return self._json
end

-- Answers this request with an error now; it leaves the batch.
function Request:fail(status, message)
  if self.failed then return end
  self.failed = true
  self.answer = { status = status, message = tostring(message) }
end

---------------------------------------------------------------- the context
local Context = class.base("Context")
M.Context = Context

function Context.new(cfg)
  local man = cfg.manifest or {}
  local sig = man.signature or {}
  return setmetatable({ model_name = cfg.model_name, model_version = cfg.model_version,
    model_dir = cfg.dir, manifest = man, config = man.config or {}, batch_size = cfg.batch_size,
    worker_id = cfg.worker_id, threads = cfg.threads, limits = cfg.limits or {},
    signature = { inputs = sig.inputs or {}, outputs = {} } }, Context)
end

-- The archive's model through the C runtime (mx.serve.runtime), at the signature's inputs.
function Context:load_model(opts)
  opts = opts or {}
  local files = self.manifest.model or {}
  if not files.symbol and not files.onnx then return nil end
  local rt = require("mx.serve.runtime")
  local dir = self.model_dir
  local model = rt.load { symbol = files.symbol and (dir .. "/" .. files.symbol),
    params = files.params and (dir .. "/" .. files.params) or nil,
    onnx = files.onnx and (dir .. "/" .. files.onnx),
    inputs = self.signature.inputs, threads = opts.threads or 0, opt_level = opts.opt_level,
    max_contexts = opts.max_contexts }
  self.signature.outputs = model:output_shapes()
  for _, o in ipairs(self.signature.outputs) do o.shape[1] = -1 end
  return model
end

---------------------------------------------------------------- the base handler
local Handler = class.base("Handler")
M.Handler = Handler

-- Handler:extend(name): a subclass (its instances are made by the worker).
function Handler.extend(parent, name) return class.extend(parent, name or "Handler") end

function Handler:initialize(ctx)
  self.ctx = ctx
  self.model = ctx:load_model()
end

local function nd() return require("mx.nd") end

-- NDArray of a v2 input (a copy of its bytes)
local function v2_tensor(req, t)
  local ffi = require("ffi")
  local x = nd().empty(t.shape, { dtype = t.dtype })
  if t.len > 0 then ffi.copy(x:data_ptr(), ffi.cast("const char *", req._blob) + t.off, t.len) end
  return x
end

local function shape_str(s) return "[" .. table.concat(s, ", ") .. "]" end

-- one input's data (a nested Lua table, or a number) as an NDArray with the batch axis
local function json_tensor(spec, data)
  local want = spec.shape
  local ok, x = pcall(nd().array, data, { dtype = spec.dtype or "float32" })
  if not ok then
    M.error(400, string.format("input '%s': %s", spec.name, tostring(x):gsub("^[^:]*:%d+: ", "")), 3)
  end
  local s = x:shape()
  local single = false
  if #s == #want - 1 then
    single = true
    local b = { 1 }
    for i = 1, #s do b[i + 1] = s[i] end
    x = x:reshape(b)
    s = b
  end
  if #s ~= #want then
    M.error(400, string.format("input '%s': shape %s does not match the model's %s (-1: any size)",
      spec.name, shape_str(s), shape_str(want)), 3)
  end
  for i = 2, #want do
    if want[i] >= 0 and want[i] ~= s[i] then
      M.error(400, string.format("input '%s': shape %s does not match the model's %s (-1: any size)",
        spec.name, shape_str(s), shape_str(want)), 3)
    end
  end
  return x, single
end

-- tensors_of(req) -> { [input name] = NDArray with the batch axis first }: the request's
-- inputs checked against the signature (raise serve.error to refuse it).
function Handler:tensors_of(req)
  local specs = self.ctx.signature.inputs
  local out = {}
  if req.kind == "v2" then
    for _, spec in ipairs(specs) do
      local t = req.inputs[spec.name]
      if not t then M.error(400, string.format("input '%s' is missing", spec.name)) end
      out[spec.name] = v2_tensor(req, t)
    end
    return out
  end
  local v = req:json()
  local by_name
  if type(v) == "table" and v[1] == nil and next(v) ~= nil then
    if v.instances ~= nil then
      local inst = v.instances
      if type(inst) ~= "table" or inst[1] == nil then M.error(400, "\"instances\" must be a non-empty array") end
      if #specs == 1 then
        by_name = { [specs[1].name] = inst }
      else
        by_name = {}
        for _, spec in ipairs(specs) do
          local rows = {}
          for i, row in ipairs(inst) do
            if type(row) ~= "table" or row[spec.name] == nil then
              M.error(400, string.format("instances[%d] has no input '%s'", i, spec.name))
            end
            rows[i] = row[spec.name]
          end
          by_name[spec.name] = rows
        end
      end
    elseif v.inputs ~= nil then
      by_name = (type(v.inputs) == "table" and v.inputs[1] == nil) and v.inputs
        or { [specs[1].name] = v.inputs }
    elseif v.data ~= nil and #specs == 1 and v[specs[1].name] == nil then
      by_name = { [specs[1].name] = v.data }
    else
      by_name = v
    end
  else
    if #specs ~= 1 then
      M.error(400, string.format("the model has %d inputs: send an object keyed by their names", #specs))
    end
    by_name = { [specs[1].name] = v }
  end
  for name in pairs(by_name) do
    local known = false
    for _, spec in ipairs(specs) do known = known or spec.name == name end
    if not known then
      local names = {}
      for i, spec in ipairs(specs) do names[i] = "'" .. spec.name .. "'" end
      M.error(400, string.format("the model has no input '%s' (its inputs: %s)", tostring(name),
        table.concat(names, ", ")))
    end
  end
  for _, spec in ipairs(specs) do
    if by_name[spec.name] == nil then M.error(400, string.format("input '%s' is missing", spec.name)) end
    local x, single = json_tensor(spec, by_name[spec.name])
    out[spec.name] = x
    req._single = req._single or single
  end
  return out
end

-- preprocess: each request's tensors, concatenated along the batch axis
function Handler:preprocess(requests)
  local specs = self.ctx.signature.inputs
  local lists, rows = {}, {}
  for _, spec in ipairs(specs) do lists[spec.name] = {} end
  local limit = math.max(self.ctx.batch_size or 1, 64)
  for _, req in ipairs(requests) do
    local ok, t = pcall(self.tensors_of, self, req)
    if not ok then
      if M.is_error(t) then req:fail(t.status, t.message) else req:fail(500, tostring(t)) end
    else
      local n = t[specs[1].name]:shape()[1]
      local bad
      for _, spec in ipairs(specs) do
        local m = t[spec.name]:shape()[1]
        if m ~= n then bad = string.format("inputs '%s' and '%s' have %d and %d rows", specs[1].name, spec.name, n, m) end
      end
      if n < 1 then bad = "the request holds no rows" elseif n > limit then
        bad = string.format("the request holds %d rows (at most %d)", n, limit)
      end
      if bad then req:fail(400, bad) else
        for _, spec in ipairs(specs) do table.insert(lists[spec.name], t[spec.name]) end
        rows[#rows + 1] = n
      end
    end
  end
  self._rows = rows
  if #rows == 0 then return nil end
  local batch = {}
  for _, spec in ipairs(specs) do
    local l = lists[spec.name]
    if #l == 1 then batch[spec.name] = l[1]
    else
      l[#l + 1] = { dim = 1 }
      batch[spec.name] = nd().concat(unpack(l))
    end
  end
  return batch
end

function Handler:inference(batch)
  if not self.model then M.error(500, "the handler has no model (initialize did not load one)") end
  return self.model:forward(batch)
end

local V2_TYPE = { float32 = "FP32", float64 = "FP64", float16 = "FP16", bfloat16 = "BF16",
  uint8 = "UINT8", int8 = "INT8", int32 = "INT32", int64 = "INT64", bool = "BOOL" }

-- answer_of(req, outs): outs lists the request's slice of each output (names in
-- self.model.output_names); returns the request's answer.
function Handler:answer_of(req, outs)
  local names = self.model.output_names
  if req.kind == "v2" then
    local want
    if req.outputs then
      want = {}
      for _, n in ipairs(req.outputs) do want[n] = true end
    end
    local list = {}
    for k, name in ipairs(names) do
      if not want or want[name] then
        local y = outs[k]
        list[#list + 1] = { name = name, datatype = V2_TYPE[y:dtype()] or "FP32", shape = y:shape(),
          data = y:tolist() }
      end
    end
    return M.response { json = { model_name = self.ctx.model_name,
      model_version = self.ctx.model_version, id = req.id, outputs = list } }
  end
  local function value(y)
    if req._single then y = y[1] end
    return y:totable()
  end
  if #names == 1 then return value(outs[1]) end
  local o = {}
  for k, name in ipairs(names) do o[name] = value(outs[k]) end
  return o
end

-- postprocess: the outputs split back per request (self.live: the requests answered)
function Handler:postprocess(outputs)
  local res = {}
  local start = 1
  local names = self.model.output_names
  for i, req in ipairs(self.live) do
    local n = self._rows[i]
    local per = {}
    for k = 1, #names do per[k] = outputs[k]:slice_view(start, start + n - 1) end
    start = start + n
    res[i] = self:answer_of(req, per)
  end
  return res
end

M._ClientError = ClientError
M._Response = Response
return M
