-- mx.autograd — eager reverse-mode autodiff over the op table's gradient formulas.
--
--   x:attach_grad()                       -- a variable: grad buffer x:grad() (zeros)
--   local y = mx.autograd.record(function() return (x * x):sum() end)
--   y:backward()                          -- x:grad() now holds 2x
--
-- This file is the API (scopes, flags, variables); the pieces: mx.autograd.tape (what a
-- tensor is in autograd, the nodes, recording; its header says how the tape is
-- kept and freed), mx.autograd.backward (backward, grad), mx.autograd.custom (custom Functions).
local lib = require("mx.core.lib")
local S = require("mx.core.state")
local nd = require("mx.nd")
local T = require("mx.autograd.tape")
local D = require("mx.nd.dispatch")
-- (installers: each adds its part of the API to the table below)
local install_backward = require("mx.autograd.backward")
local install_custom = require("mx.autograd.custom")

local ffi, C = lib.ffi, lib.C
local NDArray = nd.NDArray
local is_tensor = nd.is_tensor
local wrap = nd._wrap
local type, error, ipairs, pcall, tostring = type, error, ipairs, pcall, tostring
local ffi_string = ffi.string
local entry = T.entry
local user_level = require("mx.core.caller").level

local M = {}
M._entry, M._nodes, M._record, M._scan, M._closer = T._entry, T._nodes, T._record, T._scan, T._closer

---------------------------------------------------------------- flags and scopes
local function restore(r, t, ok, ...)
  S.recording, S.training = r, t
  if not ok then error((...), 0) end
  return ...
end

local function check_fn(fn, name)
  if type(fn) ~= "function" then
    error("mx.autograd." .. name .. ": expected a function, got " .. type(fn), 3)
  end
end

-- record(fn, {train_mode=true}, ...): runs fn(...) with recording on; returns its results.
function M.record(fn, opts, ...)
  check_fn(fn, "record")
  local r, t = S.recording, S.training
  S.recording = true
  S.training = not (type(opts) == "table" and opts.train_mode == false)
  return restore(r, t, pcall(fn, ...))
end

-- pause(fn, {train_mode=false}): runs fn with recording off.
function M.pause(fn, opts, ...)
  check_fn(fn, "pause")
  local r, t = S.recording, S.training
  S.recording = false
  S.training = type(opts) == "table" and opts.train_mode == true or false
  return restore(r, t, pcall(fn, ...))
end

function M.train_mode(fn, ...)
  check_fn(fn, "train_mode")
  local r, t = S.recording, S.training
  S.training = true
  return restore(r, t, pcall(fn, ...))
end

function M.predict_mode(fn, ...)
  check_fn(fn, "predict_mode")
  local r, t = S.recording, S.training
  S.training = false
  return restore(r, t, pcall(fn, ...))
end

function M.set_recording(b)
  local prev = S.recording
  S.recording = not not b
  return prev
end

function M.set_training(b)
  local prev = S.training
  S.training = not not b
  return prev
end

function M.is_recording() return S.recording end
function M.is_training() return S.training end

---------------------------------------------------------------- variables
local REQS = { write = true, add = true, null = true }

local function attach(x, req)
  if not is_tensor(x) then
    error("attach_grad: self must be a tensor, got " .. type(x), user_level())
  end
  req = req or "write"
  if not REQS[req] then
    error("attach_grad: grad_req must be 'write', 'add' or 'null', got " .. tostring(req),
      user_level())
  end
  if req == "null" then
    entry[x] = nil
    return
  end
  local g = nd.keep(nd.zeros(x:shape(), { dtype = x:dtype(), ctx = x:context() }))
  entry[x] = { leaf = true, req = req, grad = g }
end

-- x:attach_grad(req): makes x a variable (a leaf of later recorded graphs) with a
-- zero-filled gradient buffer. req "write" (default): backward overwrites the buffer;
-- "add": backward adds to it (zero it yourself); "null": x takes no gradient.
-- Attaching to a recorded result cuts it from its graph (it becomes a leaf).
function NDArray.attach_grad(x, req)
  attach(x, req)
end

-- x:grad(): the gradient buffer of a variable (the same tensor every time), nil when
-- x has no grad attached. A method, not a field: the FFI box has no room for fields.
function NDArray.grad(x)
  if not is_tensor(x) then nd._not_self("grad", x, 2) end
  local e = entry[x]
  if type(e) == "table" then return e.grad end
  return nil
end

-- x:detach(): the same data (a new view on the same storage) outside the graph.
local shbuf = ffi.new("int64_t[8]")
local hbuf = ffi.new("mx_tensor*[1]")
function NDArray.detach(x)
  if not is_tensor(x) then nd._not_self("detach", x, 2) end
  local n = C.mx_tensor_shape(x.h, shbuf)
  if C.mx_tensor_reshape(x.h, n, shbuf, hbuf) ~= 0 then
    error(ffi_string(C.mx_last_error()), 2)
  end
  local d = wrap(hbuf[0])
  if S.tracing then D.view(nd._view_ops.detach, x, nil, d) end
  return d
end

-- mark_variables(vars, grads, reqs): MXNet's lower-level attach_grad with given buffers.
function M.mark_variables(vars, grads, reqs)
  if is_tensor(vars) then vars, grads, reqs = { vars }, { grads }, { reqs } end
  for i, x in ipairs(vars) do
    local req = type(reqs) == "table" and reqs[i] or reqs or "write"
    if type(req) ~= "string" then req = "write" end
    attach(x, req)
    if grads and grads[i] and req ~= "null" then entry[x].grad = grads[i] end
  end
end

-- Zero a variable's gradient buffer (for grad_req "add").
function NDArray.zero_grad(x)
  if not is_tensor(x) then nd._not_self("zero_grad", x, 2) end
  local e = entry[x]
  if type(e) == "table" then
    nd.zeros(e.grad:shape(), { dtype = e.grad:dtype(), out = e.grad })
  end
end

install_backward(M)
install_custom(M)

return M
