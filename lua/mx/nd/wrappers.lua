-- mx.nd.wrappers — the Lua function of each op, built from its op-table entry:
-- unary and binary closures, fixed-arity wrappers generated with loadstring,
-- the general varargs path, creation ops (shape positionally) and positional
-- creation ops (arange, linspace, eye). `make(op, B)` picks the shape.
local lib = require("mx.core.lib")
local S = require("mx.core.state")
local H = require("mx.nd.handles")
local Pm = require("mx.nd.params")
local D = require("mx.nd.dispatch")

local type, select, error, tostring = type, select, error, tostring
local inbuf, outbuf = D.inbuf, D.outbuf
local is_tensor, wrap = H.is_tensor, H._wrap
local finish = D.finish
local fill_params, CONV = Pm._fill_params, Pm._CONV

---------------------------------------------------------------- the wrappers
-- Each takes B, a backend of mx.nd.dispatch (D.eager, or D.ref for nd._ref): the only
-- way to the C invoke.
local function bad_input(op, i, v, level)
  error(string.format("%s: input %d (%s) must be a tensor, got %s", op.name, i,
    op.inputs[i] or "data", type(v)), level + 1)
end

-- x <op> scalar (sop) or scalar <op> x (rsop)
local function scalar_call(B, sop, x, s, opts, level)
  if not is_tensor(x) then bad_input(sop, 1, x, level + 1) end
  local P, out, err = fill_params(sop, opts)
  if err then error(err, level + 1) end
  P.scalar = s
  inbuf[0] = x.h
  -- the autograd record sees the scalar as the op's param
  local ropts = (S.recording or S.tracing) and { scalar = s, out = out } or nil
  local r = B.run(sop, 1, P, out, ropts, x, nil, level + 1)
  return r -- not a tail call: `level` counts this frame
end

local function make_unary(op, B)
  return function(a, opts)
    if not is_tensor(a) then bad_input(op, 1, a, 2) end
    local P, out, err = fill_params(op, opts)
    if err then error(err, 2) end
    inbuf[0] = a.h
    local r = B.run(op, 1, P, out, opts, a, nil, 2)
    return r
  end
end

local function make_binary(op, sop, rsop, B)
  return function(a, b, opts)
    local r
    if type(b) == "number" and sop then
      r = scalar_call(B, sop, a, b, opts, 2)
      return r
    end
    if type(a) == "number" and rsop then
      r = scalar_call(B, rsop, b, a, opts, 2)
      return r
    end
    if not is_tensor(a) then bad_input(op, 1, a, 2) end
    if not is_tensor(b) then bad_input(op, 2, b, 2) end
    local P, out, err = fill_params(op, opts)
    if err then error(err, 2) end
    inbuf[0], inbuf[1] = a.h, b.h
    r = B.run(op, 2, P, out, opts, a, b, 2)
    return r
  end
end

-- Any arity; positional tensors, then an optional options table. Variadic ops also
-- accept one Lua list of tensors.
local function make_general(op, B)
  return function(...)
    local n = select("#", ...)
    local nin, opts = 0, nil
    local args = { ... }
    if op.nin == -1 and n >= 1 and type(args[1]) == "table" and not is_tensor(args[1]) then
      local list = args[1]
      opts = args[2]
      args = {}
      for i = 1, #list do args[i] = list[i] end
      n = #args
      for i = 1, n do
        if not is_tensor(args[i]) then bad_input(op, i, args[i], 2) end
      end
      nin = n
    else
      for i = 1, n do
        local v = args[i]
        if is_tensor(v) then
          nin = nin + 1
        elseif v == nil and i > nin then
          break
        elseif type(v) == "table" and i == n then
          opts = v
          break
        else
          -- a number where a tensor was expected
          if nin < #op.inputs or op.nin == -1 then bad_input(op, nin + 1, v, 2) end
          error(op.name .. ": unexpected argument " .. i .. " (" .. type(v)
            .. "); options go in one table", 2)
        end
      end
    end
    if op.nin >= 0 and (nin < op.nin_min or nin > op.nin) then -- optional inputs: a range
      if nin < op.nin_min then bad_input(op, nin + 1, args[nin + 1], 2) end
      error(string.format("%s: takes %s tensor input(s), got %d", op.name, op.nin_min == op.nin
        and tostring(op.nin) or (op.nin_min .. " to " .. op.nin), nin), 2)
    end
    if nin > 64 then error(op.name .. ": at most 64 inputs", 2) end
    local P, out, err = fill_params(op, opts)
    if err then error(err, 2) end
    for i = 1, nin do inbuf[i - 1] = args[i].h end
    local nout = #op.outputs
    for i = 0, nout - 1 do
      local o = (nout == 1 and out) or (out and out[i + 1])
      outbuf[i] = o and o.h or nil
    end
    B.call(op, nin, P, nout, 2)
    local res = {}
    for i = 1, nout do
      res[i] = (nout == 1 and out) or (out and out[i]) or wrap(outbuf[i - 1])
    end
    if S.recording or S.tracing then
      local ins = {}
      for i = 1, nin do ins[i] = args[i] end
      finish(op, ins, opts, res)
    end
    return unpack(res, 1, nout)
  end
end

-- Fixed arity (any op with a set number of inputs that the unary and binary paths do
-- not serve: pick_backward, the optimizers' updates, multi-output ops): a wrapper
-- generated for the op's exact arity, so LuaJIT compiles it (make_general's varargs,
-- {...} and unpack keep it interpreted: ~9 us a call, 1000x the op it wraps).
local FIXED = [[
local op, call, finish, is_tensor, bad_input, fill_params, inbuf, outbuf, wrap, S, type,
  error = ...
local nout = #op.outputs
return function(A, opts, extra)
  CHECKS
  if opts ~= nil and type(opts) ~= "table" or extra ~= nil or is_tensor(opts) then
    if is_tensor(opts) then
      error(string.format("%s: takes %d tensor input(s), got more", op.name, NIN), 2)
    end
    error(op.name .. ": unexpected argument " .. (extra ~= nil and NIN + 2 or NIN + 1)
      .. "; options go in one table", 2)
  end
  local P, out, err = fill_params(op, opts)
  if err then error(err, 2) end
  INPUTS
  SINGLE_OUT
  if out then
    OUT_CHECK
    OUT_GIVEN
  else
    OUT_NEW
  end
  call(op, NIN, P, nout, 2)
  local R
  if out then
    RES_GIVEN
  else
    RES_NEW
  end
  if S.recording or S.tracing then finish(op, { A }, opts, { R }) end
  return R
end
]]

local function make_fixed(op, B)
  local nin, nout = op.nin, #op.outputs
  local a, r, checks, ins, og, on, rg, rn = {}, {}, {}, {}, {}, {}, {}, {}
  -- several outputs: out= is a list of exactly nout tensors (fill_params lets a table
  -- through); one output: fill_params has checked it is a tensor
  local ocheck = nout == 1 and "" or string.format([=[if is_tensor(out) or #out ~= %d%s then
      error(string.format("%%s: out= must be a list of %d tensors (%s), got %%s", op.name,
        is_tensor(out) and "a tensor (a single out= tensor is only for the optimizer update "
          .. "ops, whose states are updated in place)" or "a table of " .. #out .. " item(s)"), 2)
    end]=], nout, (function()
      local t = {}
      for k = 1, nout do t[k] = string.format(" or not is_tensor(out[%d])", k) end
      return table.concat(t)
    end)(), nout, table.concat(op.outputs, ", "))
  -- MXNet's update ops (mutable state inputs): out=w alone writes the new weight into
  -- w and each state into the state input it comes from (op.inplace pairs output k with
  -- input i); the call returns out, as MXNet does.
  local single = ""
  if op.family == "optimizer" and nout > 1 and op.inplace then
    local sg, so = { "outbuf[0] = out.h" }, { "out" }
    for _, pr in ipairs(op.inplace) do
      if pr[1] > 1 then
        sg[#sg + 1] = string.format("outbuf[%d] = a%d.h", pr[1] - 1, pr[2])
        so[#so + 1] = "a" .. pr[2]
      end
    end
    assert(#sg == nout, op.name .. ": every state output needs an inplace input")
    local al = {}
    for i = 1, nin do al[i] = "a" .. i end
    single = string.format([=[if out and is_tensor(out) then
    %s
    call(op, %d, P, nout, 2)
    if S.recording or S.tracing then finish(op, { %s }, opts, { %s }) end
    return out
  end]=], table.concat(sg, "\n    "), nin, table.concat(al, ", "), table.concat(so, ", "))
  end
  for i = 1, nin do
    a[i] = "a" .. i
    checks[i] = string.format("if not is_tensor(a%d) then bad_input(op, %d, a%d, 2) end", i, i, i)
    ins[i] = string.format("inbuf[%d] = a%d.h", i - 1, i)
  end
  for k = 1, nout do
    r[k] = "r" .. k
    og[k] = nout == 1 and "outbuf[0] = out.h" or string.format("outbuf[%d] = out[%d].h", k - 1, k)
    on[k] = string.format("outbuf[%d] = nil", k - 1)
    rg[k] = nout == 1 and "r1 = out" or string.format("r%d = out[%d]", k, k)
    rn[k] = string.format("r%d = wrap(outbuf[%d])", k, k - 1)
  end
  local src = FIXED:gsub("%u+_?%u*", {
    SINGLE_OUT = single,
    A = table.concat(a, ", "), R = table.concat(r, ", "), NIN = tostring(nin),
    CHECKS = table.concat(checks, "\n  "), INPUTS = table.concat(ins, "\n  "),
    OUT_CHECK = ocheck, OUT_GIVEN = table.concat(og, "\n    "), OUT_NEW = table.concat(on, "\n    "),
    RES_GIVEN = table.concat(rg, "\n    "), RES_NEW = table.concat(rn, "\n    ") })
  local chunk = assert(loadstring(src, "=mx.nd(" .. op.name .. ")"))
  return chunk(op, B.call, finish, is_tensor, bad_input, fill_params, inbuf, outbuf, wrap, S,
    type, error)
end

-- Ops whose output count is an int param's value at call time (op table `num_outputs`:
-- split): fixed arity in, as many results as the param says, read from the filled
-- struct (C's mx_op_num_outputs_for: the same rule dispatch applies). out= takes a list
-- of that many tensors (one tensor when the count is 1). A separate generated wrapper,
-- so the fixed-count paths above keep their straight lines.
local COUNTED = [[
local op, call, finish, is_tensor, bad_input, fill_params, inbuf, outbuf, wrap, S, type,
  error, tostring, unpack, nout_for, pname = ...
local function bad_out(n, out)
  error(string.format("%s: out= must be a list of %d tensor(s) (%s=%d), got %s", op.name, n,
    pname, n, is_tensor(out) and "a tensor" or type(out) == "table" and #out .. " item(s)"
    or type(out)), 3)
end
COMPACT
return function(A, opts, extra)
  SHIFT
  CHECKS
  if is_tensor(opts) then
    error(string.format("%s: takes %d tensor input(s), got more", op.name, NIN), 2)
  end
  if extra ~= nil then
    error(op.name .. ": unexpected argument " .. NIN + 2 .. "; options go in one table", 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error(op.name .. ": options must be a table, got " .. type(opts), 2)
  end
  local out = opts and opts.out
  local fopts = opts
  if out ~= nil and type(out) == "table" and not is_tensor(out) then
    fopts = {} -- fill_params takes only a tensor for out= (a list is this wrapper's)
    for k, v in pairs(opts) do if k ~= "out" then fopts[k] = v end end
  end
  local P, _, err = fill_params(op, fopts)
  if err then error(err, 2) end
  local nout = nout_for(op.id, P)
  if nout < 1 then
    error(string.format("%s: %s must be an integer in 1..64, got %s", op.name, pname,
      tostring(opts and opts[pname])), 2)
  end
  INPUTS
  if out ~= nil then
    if is_tensor(out) then
      if nout ~= 1 then bad_out(nout, out) end
      outbuf[0] = out.h
    else
      if #out ~= nout then bad_out(nout, out) end
      for k = 1, nout do
        local o = out[k]
        if not is_tensor(o) then bad_out(nout, out) end
        outbuf[k - 1] = o.h
      end
    end
  else
    for k = 0, nout - 1 do outbuf[k] = nil end
  end
  call(op, NCALL, P, nout, 2)
  local res = {}
  if is_tensor(out) then res[1] = out
  else
    for k = 1, nout do res[k] = out and out[k] or wrap(outbuf[k - 1]) end
  end
  if S.recording or S.tracing then finish(op, INS, opts, res) end
  return unpack(res, 1, nout)
end
]]

-- Inputs past nin_min are optional (the RNN op's state_cell and sequence_length): nil
-- placeholders, or the options table in the first absent slot (f(x, w, s, opts)); the
-- given ones are passed in order (MXNet's input order for RNN).
local function make_counted(op, B)
  local nin, nmin = op.nin, op.nin_min
  local a, checks, ins, shift = {}, {}, {}, {}
  for i = 1, nin do
    a[i] = "a" .. i
    if i <= nmin then
      checks[i] = string.format("if not is_tensor(a%d) then bad_input(op, %d, a%d, 2) end", i, i, i)
      ins[i] = string.format("inbuf[%d] = a%d.h", i - 1, i)
    else
      checks[i] = string.format("if a%d ~= nil and not is_tensor(a%d) then bad_input(op, %d, a%d, 2) end",
        i, i, i, i)
      ins[i] = string.format("if a%d ~= nil then inbuf[nin_] = a%d.h; nin_ = nin_ + 1 end", i, i)
      local later = {}
      for j = i + 1, nin do later[#later + 1] = "a" .. j .. " == nil" end
      later[#later + 1] = "opts == nil"
      shift[#shift + 1] = string.format("if %s and type(a%d) == \"table\" and not is_tensor(a%d) "
        .. "then opts, a%d = a%d, nil end", table.concat(later, " and "), i, i, i, i)
    end
  end
  local optional = nmin < nin
  if optional then table.insert(ins, nmin + 1, "local nin_ = " .. nmin) end
  local src = COUNTED:gsub("%u+_?%u*", {
    A = table.concat(a, ", "), NIN = tostring(nin), CHECKS = table.concat(checks, "\n  "),
    INPUTS = table.concat(ins, "\n  "), NCALL = optional and "nin_" or tostring(nin),
    SHIFT = table.concat(shift, "\n  "),
    INS = optional and "compact(" .. table.concat(a, ", ") .. ")" or "{ " .. table.concat(a, ", ") .. " }",
    COMPACT = optional and ("local function compact(...)\n  local t = {}\n  for i = 1, "
      .. nin .. " do local v = select(i, ...) if v ~= nil then t[#t + 1] = v end end\n"
      .. "  return t\nend") or "" })
  local chunk = assert(loadstring(src, "=mx.nd(" .. op.name .. ")"))
  return chunk(op, B.call, finish, is_tensor, bad_input, fill_params, inbuf, outbuf, wrap, S,
    type, error, tostring, unpack, lib.C.mx_op_num_outputs_for, op.params[op.nout_param + 1].name)
end

-- Creation ops: shape positionally (table or numbers) and/or as the array part of
-- the options table: zeros{2, 3}, zeros({2, 3}, {dtype="int32"}), full({2}, 7).
local function make_creation(op, B)
  return function(a, b, c)
    local shape, opts, value
    if type(a) == "table" then
      shape = a
      if op.pindex.value and type(b) == "number" then value, opts = b, c else opts = b end
    elseif type(a) == "number" then
      shape = { a }
      opts = b
    elseif a == nil then
      shape = {}
      opts = b
    else
      error(op.name .. ": shape must be a table of dims, got " .. type(a), 2)
    end
    if opts ~= nil and type(opts) ~= "table" then
      error(op.name .. ": options must be a table, got " .. type(opts), 2)
    end
    local merged -- options in the hash part of the shape table: zeros{2, 3, dtype="int32"}
    for k, v in pairs(shape) do
      if type(k) ~= "number" then
        merged = merged or {}
        merged[k] = v
      end
    end
    if merged then
      if opts then for k, v in pairs(opts) do merged[k] = v end end
      opts = merged
    end
    local P, out, err = fill_params(op, opts)
    if err then error(err, 2) end
    local dims
    if not (opts and opts.shape) then
      dims = {}
      for i = 1, #shape do dims[i] = shape[i] end
      if not CONV.shape(P, "shape", dims) then
        error(op.name .. ": shape must be a list of non-negative integers", 2)
      end
    end
    if value ~= nil then P.value = value end
    local ropts = opts
    if S.tracing then -- the tracer sees the shape and the value as given
      ropts = {}
      if opts then for k, v in pairs(opts) do ropts[k] = v end end
      if dims then ropts.shape = dims end
      if value ~= nil then ropts.value = value end
    end
    local r = B.run(op, 0, P, out, ropts, nil, nil, 2)
    return r
  end
end

-- One wrapper per op, over a backend of mx.nd.dispatch: D.eager, or D.ref for the
-- nd._ref namespace (same API, reference kernels: the test oracle).
-- Creation ops without a shape param (arange, linspace, eye): leading numbers fill
-- the params named in the op table's `positional` list, then an options table:
-- mx.nd.arange(0, 10, 2, {dtype="int32"}), mx.nd.eye(3), mx.nd.arange{stop=5}.
local function make_positional(op, B)
  local names = op.positional
  return function(...)
    local n = select("#", ...)
    local args = { ... }
    local opts = {}
    if n > 0 and type(args[n]) == "table" then
      for k, v in pairs(args[n]) do opts[k] = v end
      n = n - 1
    end
    if n > #names then
      error(string.format("%s: at most %d positional arguments (%s), got %d", op.name, #names,
        table.concat(names, ", "), n), 2)
    end
    for i = 1, n do
      if type(args[i]) ~= "number" then
        error(string.format("%s: argument %d (%s) must be a number, got %s", op.name, i, names[i],
          type(args[i])), 2)
      end
      if opts[names[i]] ~= nil then
        error(op.name .. ": " .. names[i] .. " given both positionally and as an option", 2)
      end
      opts[names[i]] = args[i]
    end
    local P, out, err = fill_params(op, opts)
    if err then error(err, 2) end
    local r = B.run(op, 0, P, out, opts, nil, nil, 2)
    return r
  end
end

-- Optional inputs (softmax's length, fully_connected's bias, the sequence ops' lengths):
-- one output, nin_min..nin tensors, then the options table, which may follow nil
-- placeholders for absent inputs (f(x, nil, opts)). Generated for the op's exact slots
-- (s1..s<nin+2>) so LuaJIT compiles it, as FIXED (make_general's varargs run
-- interpreted: ~7x the time of a small op).
local OPTIONAL = [[
local op, call, finish, is_tensor, bad_input, fill_params, inbuf, outbuf, wrap, S, type,
  error = ...
return function(SLOTS)
  CHECKS
  local n = NMIN
  SCAN
  local opts, at, extra = nil, 0, 0
  OPTS
  EXTRA
  if extra ~= 0 then
    error(op.name .. ": unexpected argument " .. extra .. "; options go in one table", 2)
  end
  if is_tensor(opts) then
    if at > n + 1 then
      error(string.format("%s: input %d is nil (optional inputs come in order, all before "
        .. "the options)", op.name, n + 1), 2)
    end
    error(string.format("%s: takes NMIN to NMAX tensor input(s), got more", op.name), 2)
  end
  if opts ~= nil and type(opts) ~= "table" then bad_input(op, n + 1, opts, 2) end
  local P, out, err = fill_params(op, opts)
  if err then error(err, 2) end
  INPUTS
  outbuf[0] = out and out.h or nil
  call(op, n, P, 1, 2)
  local r = out or wrap(outbuf[0])
  if S.recording or S.tracing then
    local ins = { REQ }
    GIVEN
    finish(op, ins, opts, { r })
  end
  return r
end
]]

local function make_optional(op, B)
  local nmin, nmax = op.nin_min, op.nin
  local slots, checks, ins, req, given, scan, close, opt, extra = {}, {}, {}, {}, {}, {}, {},
    {}, {}
  for i = 1, nmax + 2 do slots[i] = "s" .. i end
  for i = 1, nmin do
    checks[i] = string.format("if not is_tensor(s%d) then bad_input(op, %d, s%d, 2) end", i, i, i)
    ins[i] = string.format("inbuf[%d] = s%d.h", i - 1, i)
    req[i] = "s" .. i
  end
  for k = nmin + 1, nmax do
    scan[#scan + 1] = string.format("if is_tensor(s%d) then n = %d", k, k)
    close[#close + 1] = "end"
    ins[#ins + 1] = string.format("if n >= %d then inbuf[%d] = s%d.h end", k, k - 1, k)
    given[#given + 1] = string.format("if n >= %d then ins[%d] = s%d end", k, k, k)
  end
  -- the options: the first non-nil slot after the tensors; any later non-nil is an error
  for j = nmin + 1, nmax + 1 do
    opt[#opt + 1] = string.format("if opts == nil and j_gt_n and s%d ~= nil then opts, at = s%d, %d end",
      j, j, j):gsub("j_gt_n", "n < " .. j)
  end
  for j = nmin + 2, nmax + 2 do
    extra[#extra + 1] = string.format("if extra == 0 and at ~= 0 and at < %d and s%d ~= nil then "
      .. "extra = %d end", j, j, j)
  end
  local src = OPTIONAL:gsub("%u+", {
    SLOTS = table.concat(slots, ", "), CHECKS = table.concat(checks, "\n  "),
    NMIN = tostring(nmin), NMAX = tostring(nmax),
    SCAN = table.concat(scan, "\n  ") .. " " .. table.concat(close, " "),
    OPTS = table.concat(opt, "\n  "), EXTRA = table.concat(extra, "\n  "),
    INPUTS = table.concat(ins, "\n  "), REQ = table.concat(req, ", "),
    GIVEN = table.concat(given, "\n    ") })
  local chunk = assert(loadstring(src, "=mx.nd(" .. op.name .. ")"))
  return chunk(op, B.call, finish, is_tensor, bad_input, fill_params, inbuf, outbuf, wrap, S,
    type, error)
end

local function make(op, B)
  if op.ctx and op.positional then return make_positional(op, B) end
  if op.ctx then return make_creation(op, B) end
  if op.nout_param then return make_counted(op, B) end
  if op.nin == 1 and #op.outputs == 1 and not op.variadic then return make_unary(op, B) end
  if op.nin == 2 and op.nin_min == 2 and #op.outputs == 1 and (#op.params == 0 or not op.scalar) then
    -- two tensors and options (dot, matmul, pick...): the fixed-arity path, which
    -- LuaJIT compiles (make_general's varargs and unpack do not)
    local sc = op.scalar
    return make_binary(op, sc and lib.ops_by_name[sc.op], sc and lib.ops_by_name[sc.rop], B)
  end
  if not op.variadic and op.nin >= 1 and op.nin_min == op.nin then return make_fixed(op, B) end
  if not op.variadic and op.nin_min >= 1 and op.nin_min < op.nin and #op.outputs == 1
    and #op.aux == 0 then
    return make_optional(op, B)
  end
  return make_general(op, B)
end

return { make = make }
