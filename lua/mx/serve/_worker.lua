-- mx.serve._worker — the Lua half of mx-serve-worker (tools/serve/worker.c): loads the
-- handler, initialises it, and runs each batch through preprocess / inference /
-- postprocess, turning every request's outcome into {status, content_type, body} (and
-- saying whether the handler raised on the batch: the server counts those).
-- Errors never escape: a request refused alone gets its status, a batch whose handler
-- raised gets the error's status (serve.error) or 500, with the message (the traceback
-- goes to the worker's stderr, the server's log).
local serve = require("mx.serve")
local json = require("mx.serve.json")
local nd = require("mx").nd

local M = {}
local handler, ctx

local BUILTIN = { image_classifier = "mx.serve.handlers.image_classifier",
  json_tensor = "mx.serve.handlers.json_tensor" }

local function load_handler(name, dir)
  local cls
  if BUILTIN[name] then
    cls = require(BUILTIN[name])
  else
    local chunk, err = loadfile(dir .. "/" .. name)
    if not chunk then error("handler " .. name .. ": " .. err, 0) end
    cls = chunk()
  end
  if type(cls) ~= "table" then
    error("handler " .. name .. " must return a handler class (serve.Handler:extend(...)) or a "
      .. "table of functions", 0)
  end
  -- a plain table of functions gets the defaults for what it leaves out
  if getmetatable(cls) == nil and cls.__index == nil then
    cls.__index = cls
    setmetatable(cls, { __index = serve.Handler })
  end
  return setmetatable({}, cls)
end

function M.init(cfg)
  ctx = serve.Context.new(cfg)
  handler = load_handler(cfg.handler, cfg.dir)
  handler:initialize(ctx)
  local ins = {}
  for k, s in ipairs(ctx.signature.inputs) do
    ins[k] = { name = s.name, dtype = s.dtype or "float32", shape = s.shape }
  end
  return json.encode { pid = 0, signature = { inputs = ins, outputs = ctx.signature.outputs } }
end

local function trace(e)
  if serve.is_error(e) then return e end
  return debug.traceback(tostring(e), 2)
end

local function first_line(s)
  s = tostring(s)
  return (s:match("^[^\n]*"))
end

local function error_answer(req, status, message)
  local body
  if req.kind == "v2" then body = json.encode { error = message }
  else
    local kind = status == 413 and "RequestEntityTooLargeException"
      or status >= 500 and "InternalServerException"
      or status == 400 and "BadRequestException" or "ClientErrorException"
    body = json.encode { code = status, type = kind, message = message }
  end
  return { status = status, content_type = "application/json", body = body }
end

local function to_answer(v, req)
  if getmetatable(v) == serve._Response then
    local body, ct = v.body, v.content_type
    if v.json ~= nil then
      body = json.encode(v.json, v.precision)
      ct = ct or "application/json"
    end
    return { status = v.status or 200, content_type = ct or "application/octet-stream",
      body = body or "" }
  end
  if type(v) == "string" then
    local c = v:sub(1, 1)
    return { status = 200, content_type = (c == "{" or c == "[") and "application/json"
      or "text/plain; charset=utf-8", body = v }
  end
  if v == nil then
    return error_answer(req, 500, "postprocess returned no answer for this request")
  end
  return { status = 200, content_type = "application/json", body = json.encode(v) }
end

local function fail_all(reqs, answers, e)
  local status, msg
  if serve.is_error(e) then status, msg = e.status, e.message
  else
    io.stderr:write("mx-serve-worker: handler error: ", tostring(e), "\n")
    status, msg = 500, first_line(e)
  end
  for _, r in ipairs(reqs) do
    if not answers[r.index] then answers[r.index] = error_answer(r, status, msg) end
  end
end

local function run_batch(items)
  local reqs = {}
  for i, it in ipairs(items) do reqs[i] = serve.Request.new(it.meta, it.blob, i) end
  local answers = {}
  local ok, res = xpcall(handler.preprocess, trace, handler, reqs)
  local live = {}
  for _, r in ipairs(reqs) do
    if r.failed then answers[r.index] = error_answer(r, r.answer.status, r.answer.message)
    else live[#live + 1] = r end
  end
  handler.requests, handler.live = reqs, live
  if ok and #live > 0 then
    ok, res = xpcall(handler.inference, trace, handler, res)
    if ok then ok, res = xpcall(handler.postprocess, trace, handler, res) end
    if ok and (type(res) ~= "table" or #res ~= #live) then
      ok, res = false, string.format("postprocess returned %s answers for %d requests",
        type(res) == "table" and tostring(#res) or "no list of", #live)
    end
    if ok then
      for k, r in ipairs(live) do
        local good, a = pcall(to_answer, res[k], r)
        answers[r.index] = good and a or error_answer(r, 500, first_line(a))
      end
    end
  end
  if not ok then fail_all(live, answers, res) end
  for i, r in ipairs(reqs) do
    if not answers[i] then answers[i] = error_answer(r, 500, "no answer") end
  end
  return answers, not ok
end

-- Every tensor a batch makes goes back to libmx's pool when the batch ends, not at some
-- later collection: the next batch reuses that memory instead of touching fresh pages
-- (a handler keeping a tensor across batches marks it with mx.nd.keep).
function M.batch(items)
  return nd.scope(run_batch, items)
end

return M
