-- mx.dgl.fn — DGL's built-in message and reduce functions (dgl.function) for
-- g:update_all(message, reduce) and g:apply_edges(message), which run them as one gspmm or
-- gsddmm call (no per-edge message tensor is materialised):
--   messages: copy_u(field, out) (copy_src), copy_e(field, out) (copy_edge), and
--     <lhs>_<op>_<rhs>(lhs_field, rhs_field, out) for lhs, rhs in u, v, e (lhs ~= rhs) and op
--     add, sub, mul, div, dot: u_mul_e("h", "w", "m"), u_dot_v("h", "h", "score") ...
--   reduces: sum(msg, out), mean, max, min
-- u and v fields are read from g.ndata, e fields from g.edata.
local type, error, ipairs = type, error, ipairs

local M = {}

local Message, Reduce = {}, {}
Message.__index, Reduce.__index = Message, Reduce
M.Message, M.Reduce = Message, Reduce

local function name_arg(who, what, v, level)
  if type(v) ~= "string" then
    error(who .. ": " .. what .. " must be a field name (string), got " .. type(v), level + 1)
  end
  return v
end

local function copy(who, t)
  return function(field, out)
    return setmetatable({ name = who, binary = "copy_lhs", lhs = name_arg(who, "field", field, 2),
      lt = t, out = name_arg(who, "out", out, 2) }, Message)
  end
end
M.copy_u, M.copy_e = copy("copy_u", "u"), copy("copy_e", "e")
M.copy_src, M.copy_edge = M.copy_u, M.copy_e

for _, lt in ipairs({ "u", "v", "e" }) do
  for _, rt in ipairs({ "u", "v", "e" }) do
    if lt ~= rt then
      for _, b in ipairs({ "add", "sub", "mul", "div", "dot" }) do
        local who = lt .. "_" .. b .. "_" .. rt
        M[who] = function(lhs, rhs, out)
          return setmetatable({ name = who, binary = b, lhs = name_arg(who, "lhs_field", lhs, 2),
            rhs = name_arg(who, "rhs_field", rhs, 2), lt = lt, rt = rt,
            out = name_arg(who, "out", out, 2) }, Message)
        end
      end
    end
  end
end

for _, r in ipairs({ "sum", "mean", "max", "min" }) do
  M[r] = function(msg, out)
    return setmetatable({ name = r, reduce = r, msg = name_arg(r, "msg", msg, 2),
      out = name_arg(r, "out", out, 2) }, Reduce)
  end
end

return M
