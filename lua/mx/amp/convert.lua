-- mx.amp.convert — MXNet's ReducePrecision pass on a symbol (amp.convert_model,
-- amp.convert_hybrid_block): the graph rebuilt node by node with amp_cast nodes in front
-- of the inputs of target ops (to the target dtype) and fp32 ops (to float32), and
-- amp_multicast in front of widest ops whose float inputs differ. Each (entry, dtype) is
-- cast once, whatever the number of its consumers. Entry dtypes are followed through the
-- graph as the ops' policies decide them (variables: their params' dtypes, float32 else).
local nd = require("mx.nd")
local sym = require("mx.symbol")

local M = {}

local FLOAT = { float16 = true, bfloat16 = true, float32 = true, float64 = true }
local WIDTH = { float16 = 1, bfloat16 = 2, float32 = 3, float64 = 4 }

local function copy(t)
  local r = {}
  for k, v in pairs(t or {}) do r[k] = v end
  return r
end

-- convert(s, args, auxs, policy, target, opts) -> s2, args2, auxs2
--   policy: op name -> "target" | "fp32" | "widest" | "safe" | {param, values}
--   opts.excluded_sym_names: node names left in float32; opts.cast_optional_params: params
--   read only by target ops are stored in the target dtype (no cast node for them)
function M.convert(s, args, auxs, policy, target, opts)
  opts = opts or {}
  local excluded = {}
  for _, n in ipairs(opts.excluded_sym_names or {}) do excluded[n] = true end
  local order = s:_topo()
  -- consumers' policies per variable (cast_optional_params)
  local readers = {}
  local function action(n)
    if excluded[n.name] then return "fp32" end
    local a = policy[n.op.name]
    if type(a) == "table" then
      local v = n.opts and n.opts[a[1]]
      local hit = false
      for _, x in ipairs(a[2]) do hit = hit or x == v end
      a = hit and "fp32" or "safe"
    end
    return a or "safe"
  end
  for _, n in ipairs(order) do
    if n.op then
      local a = action(n)
      for _, e in ipairs(n.inputs) do
        local v = e[1]
        if v.op == nil then
          readers[v] = readers[v] or {}
          readers[v][a] = true
        end
      end
    end
  end
  local args2, auxs2 = copy(args), copy(auxs)
  local sym_of, dtype_of = {}, {}   -- node -> its new Symbol; entry key -> dtype
  local casts = {}                  -- entry key .. dtype -> Symbol
  local function key(e) return tostring(e[1]) .. "#" .. e[2] end
  local function entry(e) return sym._node_symbol(sym_of[e[1]], e[2]) end
  local function root(x) return x.outputs[1][1] end
  for _, n in ipairs(order) do
    if n.op == nil then
      local dt = "float32"
      local value = args[n.name] or auxs[n.name]
      if value then dt = value:dtype() end
      local r = readers[n]
      if opts.cast_optional_params and args[n.name] and FLOAT[dt] and r and r.target
        and not r.fp32 and not r.widest and not r.safe then
        args2[n.name] = args[n.name]:astype(target)
        local attrs = copy(n.attrs)
        attrs.__dtype__ = tostring(nd.dtype_code and nd.dtype_code(target) or target)
        local v = sym.var(n.name, { attr = attrs })
        sym_of[n], dt = root(v), target
      else
        sym_of[n] = n
      end
      dtype_of[tostring(n) .. "#1"] = dt
    else
      local a = action(n)
      local ins, dts = {}, {}
      for i, e in ipairs(n.inputs) do ins[i], dts[i] = e, dtype_of[key(e)] or "float32" end
      local want
      if a == "target" then want = target
      elseif a == "fp32" then want = "float32"
      elseif a == "widest" then
        local w, differ
        for _, d in ipairs(dts) do
          if FLOAT[d] then
            if w and w ~= d then differ = true end
            if not w or WIDTH[d] > WIDTH[w] then w = d end
          end
        end
        if differ then want = w end
      end
      local syms = {}
      if a == "widest" and want then
        local mc = sym.amp_multicast((function()
          local t = {}
          for i, e in ipairs(ins) do t[i] = entry(e) end
          return unpack(t)
        end)(), { num_outputs = #ins, name = n.name .. "_amp_multicast" })
        local node = root(mc)
        for i = 1, #ins do syms[i] = sym._node_symbol(node, i) end
        for i = 1, #ins do if FLOAT[dts[i]] then dts[i] = want end end
      else
        for i, e in ipairs(ins) do
          local d = dts[i]
          if want and FLOAT[d] and d ~= want then
            local k = key(e) .. want
            if not casts[k] then
              casts[k] = sym.amp_cast(entry(e), { dtype = want,
                name = (e[1].name .. "_amp_cast_" .. want) })
            end
            syms[i], dts[i] = casts[k], want
          else
            syms[i] = entry(e)
          end
        end
      end
      local o = copy(n.opts)
      o.name, o.attr = n.name, next(n.attrs or {}) and copy(n.attrs) or nil
      syms[#syms + 1] = o
      local r = sym[n.op.name](unpack(syms))
      sym_of[n] = root(r)
      local first
      for _, d in ipairs(dts) do if FLOAT[d] then first = first or d end end
      for k = 1, n.nout do
        dtype_of[tostring(n) .. "#" .. k] = (n.op.family == "amp" and n.opts and n.opts.dtype)
          or (a == "fp32" and "float32") or (a == "target" and target) or first or "float32"
      end
    end
  end
  local outs = {}
  for k, e in ipairs(s.outputs) do outs[k] = entry(e) end
  return #outs == 1 and outs[1] or sym.Group(outs), args2, auxs2
end

return M
