-- mx.nd.print — tostring(x): values (summarised past 1000 elements), shape, dtype and
-- device, like MXNet and Torch7. Installed by mx.nd: `require("mx.nd.print")(nd)`.
local lib = require("mx.core.lib")
local context = require("mx.context")
local S = require("mx.core.state")

local ffi, C = lib.ffi, lib.C
local tostring = tostring

return function(nd)
local NDArray = nd.NDArray
local check, tolist, f64_at = nd._check, nd._tolist, nd._f64_at

---------------------------------------------------------------- printing
local function fmt_num(v, is_float)
  if type(v) == "cdata" then return (tostring(v):gsub("LL$", "")) end -- int64 past 2^53
  if not is_float then return string.format("%d", v) end
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" end
  if v == -math.huge then return "-inf" end
  local s = string.format("%.6g", v)
  if not s:find("[%.eE]") then s = s .. "." end
  return s
end

local EDGE = 3
local f64_1 = ffi.typeof("double[1]")
function NDArray.__tostring(x)
  if not nd.is_tensor(x) then nd._not_self("NDArray.__tostring", x, 2) end
  -- hybridize's trace: the text shows values, so they are a guard like tolist()'s
  if S.guard then S.guard(x, tolist(x, 2, "tostring")) end
  local shape = NDArray.shape(x)
  local dtype = NDArray.dtype(x)
  local is_float = dtype:find("float") ~= nil
  local ctx = tostring(NDArray.context(x))
  local src = x
  if C.mx_tensor_dev_type(x.h) ~= 1 then src = NDArray.to(x, context.cpu()) end
  local n = NDArray.size(src)
  local summarize = n > 1000
  local strides = {}
  local st = 1
  for d = #shape, 1, -1 do strides[d] = st st = st * shape[d] end
  local function shown(len, i) -- is index i of an axis of length len displayed?
    return not (summarize and len > 2 * EDGE and i > EDGE and i <= len - EDGE)
  end
  -- the flat offsets on display: all of them, or EDGE at each end of every axis
  local offs = {}
  local function collect(d, off)
    if d > #shape then offs[#offs + 1] = off return end
    for i = 1, shape[d] do
      if shown(shape[d], i) then collect(d + 1, off + (i - 1) * strides[d]) end
    end
  end
  collect(1, 0)
  local strs, width = {}, 0
  if summarize then -- read only what is shown: a 10^8-element tensor prints fast
    local v = f64_1()
    local vw = ffi.cast(nd._u32p, v)
    for k = 1, #offs do
      check(C.mx_tensor_get_f64(src.h, offs[k], v), 3) -- 3: the caller of tostring()
      strs[offs[k]] = fmt_num(f64_at(v, vw, 0), is_float) -- (NaN payloads: see nd._f64_at)
    end
  else
    local flat = tolist(src, 3)
    for k = 1, #offs do strs[offs[k]] = fmt_num(flat[offs[k] + 1], is_float) end
  end
  for k = 1, #offs do
    local w = #strs[offs[k]]
    if w > width then width = w end
  end
  local function render(d, off, indent)
    if d > #shape then return string.rep(" ", width - #strs[off]) .. strs[off] end
    local parts = {}
    local len = shape[d]
    for i = 1, len do
      if summarize and len > 2 * EDGE and i == EDGE + 1 then
        parts[#parts + 1] = "..."
      end
      if shown(len, i) then
        parts[#parts + 1] = render(d + 1, off + (i - 1) * strides[d], indent .. " ")
      end
    end
    local sep = d == #shape and " " or ("\n" .. string.rep("\n", #shape - d - 1) .. indent .. " ")
    return "[" .. table.concat(parts, sep) .. "]"
  end
  local body = #shape == 0 and strs[0] or render(1, 0, "")
  local dims = #shape == 0 and "scalar" or table.concat(shape, "x")
  return body .. "\n<NDArray " .. dims .. " " .. dtype .. " @" .. ctx .. ">"
end
end
