-- mx.nd.index — views and indexing of NDArrays: reshape (a view, or the reshape op),
-- x[i] and x[{ranges}] (leading-axis views, copies through slice past it) and index
-- assignment x[...] = v. Installed by mx.nd: `local index, assign = require("mx.nd.index")(nd)`.
local lib = require("mx.core.lib")
local S = require("mx.core.state")
local H = require("mx.nd.handles")
local Pm = require("mx.nd.params")
local D = require("mx.nd.dispatch")

local C = lib.C
local type, error, tostring, tonumber = type, error, tostring, tonumber
local inbuf, outbuf, shapebuf = H.inbuf, H.outbuf, H.shapebuf
local is_tensor, wrap, owners = H.is_tensor, H._wrap, H.owners
local fill_params, is_int = Pm._fill_params, Pm._is_int
local eager, view = D.eager, D.view

return function(nd)
local NDArray = nd.NDArray
local check = nd._check

---------------------------------------------------------------- views and indexing
-- Views recorded by autograd as pseudo-ops (mx.autograd gives them their grads):
-- x[i] (index = 1-based row), x[{a, b}] on the first axis (begin/end 0-based, end
-- exclusive), and reshape when the op table has no reshape op.
local VIEW_OPS = {
  index0 = { name = "index0_view", outputs = { "out" } },
  slice0 = { name = "slice0_view", outputs = { "out" } },
  reshape = { name = "reshape_view", outputs = { "out" } },
  -- x:detach() (mx.autograd): seen by the tracer only (outside the graph)
  detach = { name = "detach_view", outputs = { "out" }, nondiff = true },
}
nd._view_ops = VIEW_OPS

-- reshape is a view (MXNet's 0 and -1 codes apply); x:reshape{3, -1},
-- x:reshape(3, -1) or x:reshape{shape={3, -1}}. reverse=, out= and the codes
-- -2/-3/-4 run the reshape op (a copy) instead.
function NDArray.reshape(x, shape, ...)
  if not is_tensor(x) then nd._not_self("reshape", x, 2) end
  if type(shape) == "number" then shape = { shape, ... } end
  if type(shape) ~= "table" then error("reshape: shape must be a table of dims", 2) end
  local special = shape.reverse ~= nil or shape.out ~= nil
  for k in pairs(shape) do
    if type(k) ~= "number" and k ~= "shape" and k ~= "reverse" and k ~= "out" then special = true end
  end
  if shape.shape ~= nil then
    if type(shape.shape) ~= "table" or #shape > 0 then special = true end
  end
  local dims = type(shape.shape) == "table" and shape.shape or shape
  for i = 1, #dims do
    if is_int(dims[i]) and dims[i] < -1 then special = true end
  end
  if special and lib.ops_by_name.reshape then
    if not is_tensor(x) then error("reshape: input 1 (data) must be a tensor", 2) end
    local op = lib.ops_by_name.reshape
    local opts = shape
    if shape.shape == nil then
      opts = { shape = {} }
      for k, v in pairs(shape) do if type(k) == "number" then opts.shape[k] = v else opts[k] = v end end
    end
    local P, out, err = fill_params(op, opts)
    if err then error(err, 2) end
    inbuf[0] = x.h
    local r = eager.run(op, 1, P, out, opts, x, nil, 2)
    return r
  end
  shape = dims
  local n = #shape
  if n > 8 then error("reshape: at most 8 dims", 2) end
  for i = 1, n do
    if not is_int(shape[i]) then error("reshape: dims must be integers", 2) end
    shapebuf[i - 1] = shape[i]
  end
  check(C.mx_tensor_reshape(x.h, n, shapebuf, outbuf), 2)
  local r = wrap(outbuf[0])
  if owners[x] ~= nil then owners[r] = owners[x] end
  if S.recording or S.tracing then
    view(lib.ops_by_name.reshape or VIEW_OPS.reshape, x, { shape = shape }, r)
  end
  return r
end

-- who: the name the user called ("index" for x[...], "slice_view").
local function norm_index(i, n, what, level, who)
  if not is_int(i) or i == 0 then
    error(string.format("%s: %s must be a non-zero integer (1-based), got %s", who or "index",
      what, tostring(i)), level + 1)
  end
  local j = i < 0 and n + i + 1 or i
  if j < 1 or j > n then
    error(string.format("%s: %s %d out of range for a dimension of size %d", who or "index",
      what, i, n), level + 1)
  end
  return j
end

-- x[i]: row i (1-based, negative from the end) as a view without the leading axis.
local function index_row(x, i, level)
  local n = tonumber(C.mx_tensor_dim(x.h, 0))
  if n < 0 then error("index: cannot index a 0-d tensor", level + 1) end
  local j = norm_index(i, n, "index", level + 1)
  check(C.mx_tensor_index0(x.h, j - 1, outbuf), level + 1)
  local r = wrap(outbuf[0])
  if owners[x] ~= nil then owners[r] = owners[x] end
  if S.recording or S.tracing then view(VIEW_OPS.index0, x, { index = j }, r) end
  return r
end

-- {a, b} inclusive 1-based range (negatives from the end), {} the whole axis,
-- {a} a single index kept as a size-1 range. Returns 0-based [begin, end).
local function norm_range(r, n, level, who)
  if type(r) == "number" then
    local j = norm_index(r, n, "index", level + 1, who)
    return j - 1, j, true
  end
  if type(r) ~= "table" then
    error((who or "index") .. ": each entry must be an integer or a range table {first, last}",
      level + 1)
  end
  local a, b = r[1] or 1, r[2] or r[1] or -1
  if r[1] == nil then b = -1 end
  local ja = norm_index(a, n, "range start", level + 1, who)
  local jb = norm_index(b, n, "range end", level + 1, who)
  if jb < ja - 1 then
    error(string.format("%s: empty-by-inversion range {%d, %d}", who or "index", a, b), level + 1)
  end
  return ja - 1, jb, false
end

-- x[{r1, r2, ...}]: a range per leading axis. Ranges on the first axis alone give a
-- view; ranges on later axes copy (through the slice op).
local function index_ranges(x, spec, level, who)
  local shape = NDArray.shape(x)
  if #spec > #shape then
    error(string.format("%s: %d ranges for a %d-d tensor", who or "index", #spec, #shape),
      level + 1)
  end
  local begin, stop, drop = {}, {}, {}
  local copy = false
  for d = 1, #spec do
    begin[d], stop[d], drop[d] = norm_range(spec[d], shape[d], level + 1, who)
    if d > 1 and (begin[d] ~= 0 or stop[d] ~= shape[d]) then copy = true end
  end
  local r
  if not copy then
    check(C.mx_tensor_slice0(x.h, begin[1], stop[1], outbuf), level + 1, who)
    r = wrap(outbuf[0])
    if owners[x] ~= nil then owners[r] = owners[x] end
    if S.recording or S.tracing then
      view(VIEW_OPS.slice0, x, { begin = begin[1], ["end"] = stop[1] }, r)
    end
  else
    if not nd.slice then error("index: ranges past the first axis need the slice op", level + 1) end
    local b1, e1 = {}, {}
    for d = 1, #spec do b1[d], e1[d] = begin[d] + 1, stop[d] end
    r = nd.slice(x, { begin = b1, ["end"] = e1 })
  end
  -- integer entries drop their axis (Torch/NumPy), ranges keep it
  local newshape, any = {}, false
  local rs = NDArray.shape(r)
  for d = 1, #rs do
    if drop[d] then any = true else newshape[#newshape + 1] = rs[d] end
  end
  if any then r = NDArray.reshape(r, newshape) end
  return r
end

local function index(x, k, level)
  local r -- no tail calls: `level` counts this frame
  if type(k) == "number" then r = index_row(x, k, level + 1)
  elseif type(k) == "table" then r = index_ranges(x, k, level + 1) end
  return r
end
NDArray.slice_view = function(x, first, last) -- rows first..last (inclusive) as a view
  if not is_tensor(x) then nd._not_self("slice_view", x, 2) end
  local r = index_ranges(x, { { first, last } }, 2, "slice_view")
  return r
end

-- A Lua array assigned as a value: a tensor of x's dtype and context (MXNet converts
-- the value to the target's dtype first); a ragged or non-numeric table is an error
-- at the user's line (assign's caller: level 3 from here).
local function table_value(x, v)
  local ok, r = pcall(nd.array, v, { dtype = NDArray.dtype(x), ctx = NDArray.context(x) })
  if not ok then
    error("index: the assigned Lua array cannot be converted to a tensor: "
      .. tostring(r):gsub("^[^:]*:%d+: ", ""), 3)
  end
  return r
end

-- x[i] = v / x[{...}] = v: v a number, a tensor or a nested Lua array (converted
-- to a tensor of x's dtype) broadcastable (NumPy) to the
-- selection without its integer-indexed axes. Leading-axis selections write
-- through a view; others run slice_assign (or slice_assign_scalar) in place,
-- with out = x.
local function assign(x, k, v)
  if type(k) ~= "number" and type(k) ~= "table" then
    error("index: cannot assign field " .. tostring(k) .. " of a tensor", 2)
  end
  if type(v) == "table" and not is_tensor(v) then v = table_value(x, v) end
  if type(v) ~= "number" and not is_tensor(v) then
    error("index: can only assign a number or a tensor (or a nested Lua array), got " .. type(v), 2)
  end
  if S.recording and S.on_write then S.on_write(x, "index assignment") end
  local shape = NDArray.shape(x)
  local spec = type(k) == "number" and { k } or k
  if #spec > #shape then
    error(string.format("index: %d ranges for a %d-d tensor", #spec, #shape), 2)
  end
  if #shape == 0 then error("index: cannot index a 0-d tensor", 2) end
  local b1, e1, region, dropped = {}, {}, {}, {}
  local leading, nkept = true, 0
  for d = 1, #shape do
    local b, e, drop = 0, shape[d], false
    if spec[d] ~= nil then b, e, drop = norm_range(spec[d], shape[d], 2) end
    if d > 1 and (b ~= 0 or e ~= shape[d]) then leading = false end
    b1[d], e1[d], region[d], dropped[d] = b + 1, e, e - b, drop
    if not drop then nkept = nkept + 1 end
  end
  if is_tensor(v) and nkept < #region then
    -- NumPy: the value broadcasts against the selection without its integer-indexed
    -- axes; give it unit axes there (right-aligned to the kept axes) so it
    -- broadcasts against the box slice_assign sees
    local vs = NDArray.shape(v)
    if #vs <= nkept then
      local full, lead, seen, j = {}, nkept - #vs, 0, 1
      for d = 1, #region do
        if dropped[d] then
          full[d] = 1
        else
          seen = seen + 1
          if seen <= lead then full[d] = 1 else full[d], j = vs[j], j + 1 end
        end
      end
      v = NDArray.reshape(v, full)
    end
  end
  if leading and nd.full and not S.tracing then -- (traced: the op below, replayable)
    check(C.mx_tensor_slice0(x.h, b1[1] - 1, e1[1], outbuf), 2)
    local target = wrap(outbuf[0])
    if type(v) == "number" then
      nd.full(NDArray.shape(target), v, { dtype = NDArray.dtype(target), ctx = NDArray.context(x),
        out = target })
      return
    end
    local vs, ts = NDArray.shape(v), NDArray.shape(target)
    if table.concat(vs, ",") == table.concat(ts, ",") then
      check(C.mx_tensor_copy_into(target.h, v.h), 2)
      return
    end
  end
  local opt = { begin = b1, ["end"] = e1, out = x }
  local op
  if type(v) == "number" then
    op = lib.ops_by_name.slice_assign_scalar
    opt.scalar = v
    inbuf[0] = x.h
  else
    op = lib.ops_by_name.slice_assign
    inbuf[0], inbuf[1] = x.h, v.h
  end
  local P, _, err = fill_params(op, opt)
  if err then error(err, 2) end
  outbuf[0] = x.h
  eager.call(op, op.nin, P, 1, 2)
  if S.tracing then D.assign(op, type(v) == "number" and { x } or { x, v }, opt, x) end
end

return index, assign
end
