-- mx.nd's smaller MXNet 1.9 functions that are compositions of luamx ops, and MXNet's
-- namespaces over the flat names (nd.linalg.gemm is nd.linalg_gemm; nd.image, see
-- lua/mx/nd/image.lua):
--
--   nd.reset_arrays(a, b, ..., {num_arrays=})   every array set to 0 in place (MXNet's op
--                                              for multi-tensor optimizers); returns nothing
--   nd.shape_array(data), nd.size_array(data)   the ops (data's shape / size as int64
--                             arrays), data also by name
--   nd.argmax_channel(data)   the argmax along the last axis (1-based, as nd.argmax)
--   nd.batch_take(a, indices) a (N, M), indices (N): out[i] = a[i, indices[i]], 1-based
--                             (nd.pick along axis 2; gradient pick's)
--   nd.linalg_sumlogdiag(A)   sum of log of the diagonal of each square matrix of A
--                             (..., n, n) -> (...) ((1) for one matrix); gradient 1 / A_ii
--                             on the diagonal
--
-- nd.lua calls this module once, after the op functions exist: install(nd).
local class = require("mx.core.class")

local type, error, select, tostring = type, error, select, tostring

return function(nd)
  local function tensor(who, x, what)
    if not nd.is_tensor(x) then
      error(who .. ": " .. (what or "data") .. " must be a tensor, got " .. type(x), 3)
    end
  end
  local function shape_str(s) return "(" .. table.concat(s, ", ") .. ")" end

  function nd.reset_arrays(...)
    local n = select("#", ...)
    local last = n > 0 and select(n, ...) or nil
    local num
    if type(last) == "table" and not nd.is_tensor(last) then
      for k in pairs(last) do
        if k ~= "num_arrays" then
          error("reset_arrays: unknown option '" .. tostring(k) .. "' (valid: num_arrays)", 2)
        end
      end
      num, n = last.num_arrays, n - 1
    end
    if num ~= nil and num ~= n then
      error(string.format("reset_arrays: num_arrays is %s but %d arrays were given", tostring(num), n), 2)
    end
    for i = 1, n do
      local x = select(i, ...)
      tensor("reset_arrays", x, "argument " .. i)
      nd.zeros_like(x, { out = x }) -- (0-d arrays too)
    end
  end

  -- the ops, taking data by name too (nd.shape_array{data = x})
  local shape_op, size_op = nd.shape_array, nd.size_array
  local SHAPE = class.signature("shape_array", { "data" })
  function nd.shape_array(...)
    local o = SHAPE(2, ...)
    tensor("shape_array", o.data)
    return shape_op(o.data)
  end
  class.declare(nd.shape_array, SHAPE)

  local SIZE = class.signature("size_array", { "data" })
  function nd.size_array(...)
    local o = SIZE(2, ...)
    tensor("size_array", o.data)
    return size_op(o.data)
  end
  class.declare(nd.size_array, SIZE)

  local ARGMAXC = class.signature("argmax_channel", { "data" })
  function nd.argmax_channel(...)
    local o = ARGMAXC(2, ...)
    tensor("argmax_channel", o.data)
    local ok, r = pcall(nd.argmax, o.data, { axis = -1 })
    if not ok then error((tostring(r):gsub("^[^\n]-:%d+: ", ""):gsub("^argmax", "argmax_channel")), 2) end
    return r
  end
  class.declare(nd.argmax_channel, ARGMAXC)

  local BTAKE = class.signature("batch_take", { "a", "indices" })
  function nd.batch_take(...)
    local o = BTAKE(2, ...)
    tensor("batch_take", o.a, "a")
    tensor("batch_take", o.indices, "indices")
    local s, is = o.a:shape(), o.indices:shape()
    if #s ~= 2 or #is ~= 1 or is[1] ~= s[1] then
      error("batch_take: a must be (N, M) and indices (N), got " .. shape_str(s) .. " and "
        .. shape_str(is), 2)
    end
    local ok, r = pcall(nd.pick, o.a, o.indices, { axis = 2 })
    if not ok then error((tostring(r):gsub("^[^\n]-:%d+: ", ""):gsub("^pick", "batch_take")), 2) end
    return r
  end
  class.declare(nd.batch_take, BTAKE)

  local SLD = class.signature("linalg_sumlogdiag", { "A" })
  function nd.linalg_sumlogdiag(...)
    local o = SLD(2, ...)
    tensor("linalg_sumlogdiag", o.A, "A")
    local s = o.A:shape()
    local n = s[#s]
    if #s < 2 or s[#s - 1] ~= n then
      error("linalg_sumlogdiag: A must be square matrices (..., n, n), got " .. shape_str(s), 2)
    end
    -- the diagonal: every (n + 1)-th element of each flattened matrix
    local flat = {}
    for i = 1, #s - 2 do flat[i] = s[i] end
    flat[#flat + 1] = n * n
    local b, e, st = {}, {}, {}
    for i = 1, #flat do b[i], e[i], st[i] = 1, flat[i], 1 end
    st[#st] = n + 1
    local diag = nd.slice(o.A:reshape(flat), { begin = b, ["end"] = e, step = st })
    local r = nd.log(diag):sum { axis = -1 }
    if #s == 2 then r = r:reshape { 1 } end -- (1), as MXNet's and nd.linalg_det's
    return r
  end
  class.declare(nd.linalg_sumlogdiag, SLD)

  nd.linalg = setmetatable({}, { __index = function(_, k) return nd["linalg_" .. k] end })
  local image
  nd.image = setmetatable({}, { __index = function(_, k)
    image = image or require("mx.nd.image")(nd)
    return image[k]
  end })
end
