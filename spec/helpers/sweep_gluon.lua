-- spec/helpers/sweep_gluon.lua — the Gluon layers' part of the surface sweep
-- (spec/sweep_surfaces_spec.lua), GENERATED from what gluon.nn and gluon.rnn expose:
--   * every constructor option (found by asking the constructor: an unknown option's
--     error lists the valid ones) given wrong values: a clean error or a working layer;
--   * every layer that has a working call (its CTOR entry, or the first of INPUTS it
--     takes) run hybridized against eager: values, the input's and every parameter's
--     gradient and the parameters after the step (running statistics), for 1, 2 and 3
--     calls inside one autograd.record, in train and in predict mode.
-- A new layer class is swept the day it is added; one that needs arguments goes in CTOR.
--   local G = require("helpers.sweep_gluon")
--   G.cases(mx) -> { {id=, names=, setup=, call=, expect=, check=}, ... } (child_gluon's form)
local M = {}

-- constructor (a Lua expression over nn / rnn; OPTS: where the options table goes) and
-- the op the layer runs (errors may name either)
M.CTOR = {
  Dense = { "nn.Dense(3, OPTS)", "fully_connected", "{in_units = 4}" },
  Dropout = { "nn.Dropout(0.5, OPTS)", "dropout" },
  Activation = { 'nn.Activation("relu")', "relu" },
  Flatten = { "nn.Flatten()", "reshape" },
  Lambda = { 'nn.Lambda("tanh")', "tanh" },
  HybridLambda = { 'nn.HybridLambda("tanh")', "tanh" },
  Sequential = { "nn.Sequential():add(nn.Dense(3, {in_units = 4}))", "fully_connected" },
  HybridSequential = { "nn.HybridSequential():add(nn.Dense(3, {in_units = 4}))", "fully_connected" },
  LeakyReLU = { "nn.LeakyReLU(0.1)", "leaky_relu" }, PReLU = { "nn.PReLU(OPTS)", "leaky_relu" },
  ELU = { "nn.ELU()", "leaky_relu" }, SELU = { "nn.SELU()", "leaky_relu" },
  GELU = { "nn.GELU()", "gelu" }, Swish = { "nn.Swish()", "silu" }, SiLU = { "nn.SiLU()", "silu" },
  HardSigmoid = { "nn.HardSigmoid()", "hard_sigmoid" },
  HardSwish = { "nn.HardSwish()", "hard_swish" },
  BatchNorm = { "nn.BatchNorm(OPTS)", "batch_norm", "{in_channels = 4}" },
  SyncBatchNorm = { "nn.SyncBatchNorm(OPTS)", "batch_norm", "{in_channels = 4}" },
  InstanceNorm = { "nn.InstanceNorm(OPTS)", "instance_norm", "{in_channels = 4}" },
  GroupNorm = { "nn.GroupNorm(OPTS)", "group_norm", "{num_groups = 2}" },
  LayerNorm = { "nn.LayerNorm(OPTS)", "layer_norm", "{axis = 2, in_channels = 4}" },
  Conv1D = { "nn.Conv1D(3, 2, OPTS)", "convolution", "{in_channels = 4}" },
  Conv2D = { "nn.Conv2D(3, 2, OPTS)", "convolution", "{in_channels = 4}" },
  Conv3D = { "nn.Conv3D(3, 2, OPTS)", "convolution", "{in_channels = 4}" },
  Conv1DTranspose = { "nn.Conv1DTranspose(3, 2, OPTS)", "deconvolution", "{in_channels = 4}" },
  Conv2DTranspose = { "nn.Conv2DTranspose(3, 2, OPTS)", "deconvolution", "{in_channels = 4}" },
  Conv3DTranspose = { "nn.Conv3DTranspose(3, 2, OPTS)", "deconvolution", "{in_channels = 4}" },
  DeformableConvolution = { "nn.DeformableConvolution(3, 3, OPTS)", "deformable_convolution",
    "{in_channels = 4, padding = 1}" },
  ModulatedDeformableConvolution = { "nn.ModulatedDeformableConvolution(3, 3, OPTS)",
    "modulated_deformable_convolution", "{in_channels = 4, padding = 1}" },
  Embedding = { "nn.Embedding(6, 3, OPTS)", "embedding" },
  Concatenate = { "nn.Concatenate(2):add(nn.Dense(3, {in_units = 4})):add(nn.Dense(2, {in_units = 4}))",
    "concat" },
  HybridConcatenate = { "nn.HybridConcatenate(2):add(nn.Dense(3, {in_units = 4}))"
    .. ":add(nn.Dense(2, {in_units = 4}))", "concat" },
  ReflectionPad2D = { "nn.ReflectionPad2D(1)", "pad" },
  PixelShuffle1D = { "nn.PixelShuffle1D(2)", "PixelShuffle1D" },
  PixelShuffle2D = { "nn.PixelShuffle2D(2)", "PixelShuffle2D" },
  PixelShuffle3D = { "nn.PixelShuffle3D(2)", "PixelShuffle3D" },
  PositionalEncoding = { "nn.PositionalEncoding(4, OPTS)", "PositionalEncoding", "{max_length = 8}" },
  PositionwiseFFN = { "nn.PositionwiseFFN(OPTS)", "PositionwiseFFN", "{units = 4, hidden_size = 8}" },
  TransformerEncoderCell = { "nn.TransformerEncoderCell(OPTS)", "TransformerEncoderCell",
    "{units = 4, hidden_size = 8, num_heads = 2}" },
  TransformerEncoder = { "nn.TransformerEncoder(OPTS)", "TransformerEncoder",
    "{units = 4, hidden_size = 8, num_heads = 2, num_layers = 1, max_length = 8}" },
  RNN = { "rnn.RNN(5, 1, OPTS)", "rnn", "{input_size = 4}" },
  LSTM = { "rnn.LSTM(5, 1, OPTS)", "rnn", "{input_size = 4}" },
  GRU = { "rnn.GRU(5, 1, OPTS)", "rnn", "{input_size = 4}" },
}

-- inputs tried in turn for a layer without its own (Lua expressions over nd); the first
-- that an eager call takes is the layer's working call
M.INPUTS = {
  "nd.array({{0.5, -1, 2, 0.25}, {1.5, 0.75, -0.5, 1}})",                  -- (2, 4)
  "nd.array({{{0.5, -1, 2, 0.25, 1}, {1, 0.5, -2, 1.5, 0}, {0.25, 1, 1, -1, 2}, "
    .. "{2, -0.5, 0.5, 1, 1}}, {{1, 2, 0.5, -1, 0.25}, {0.5, 0.5, 1, 2, -1}, "
    .. "{-1, 1, 0.25, 0.5, 1.5}, {1, 1, -2, 0.5, 0.75}}})",                  -- (2, 4, 5)
  "nd.arange(0, 2 * 4 * 5 * 5):reshape({2, 4, 5, 5}):sin()",                 -- (2, 4, 5, 5)
  "nd.arange(0, 2 * 4 * 4 * 4 * 4):reshape({2, 4, 4, 4, 4}):cos()",          -- (2, 4, 4, 4, 4)
  "nd.array({{1, 0, 3}, {2, 5, 4}})",                                        -- indices (2, 3)
  "nd.arange(0, 3 * 2 * 4):reshape({3, 2, 4}):sin()",                        -- (T, N, C)
}

-- wrong values for an option (Lua expressions)
local BAD = { '"x"', "-1", "0/0", "2.5", "{}", "true", "1e12" }

local function ctor_of(name, cls_in, opts)
  local c = M.CTOR[name]
  local o = opts or (c and c[3])
  -- a class of no entry: Class() plain (its first argument may be positional), with
  -- options Class({...})
  local expr = c and c[1] or (cls_in .. "." .. name .. (o and "(OPTS)" or "()"))
  o = o or "{}"
  if expr:find("OPTS", 1, true) then return (expr:gsub("OPTS", o)), c and c[2] or name end
  return expr, c and c[2] or name
end

-- A class's constructor expression (its CTOR entry with its options, else Class()) and
-- the op it runs; cls_in: "nn" or "rnn".
function M.ctor(name, cls_in) return ctor_of(name, cls_in or "nn") end

-- "{a = 1}" + "b = 2" -> "{a = 1, b = 2}"
local function with_opt(base, kv)
  if base == "{}" then return "{" .. kv .. "}" end
  return base:sub(1, -2) .. ", " .. kv .. "}"
end

local function sorted_blocks(tab, pred)
  local r = {}
  for k, v in pairs(tab) do
    if type(k) == "string" and type(v) == "table" and v.__is_block and (not pred or pred(k, v)) then
      r[#r + 1] = k
    end
  end
  table.sort(r)
  return r
end

-- The option names a constructor takes: ask it with an unknown one.
local function options_of(mx, expr_with_probe)
  local env = { nn = mx.gluon.nn, rnn = mx.gluon.rnn, nd = mx.nd, mx = mx }
  local f = loadstring("return " .. expr_with_probe)
  if not f then return nil end
  setfenv(f, setmetatable(env, { __index = _G }))
  local ok, err = pcall(f)
  if ok then return nil end
  local list = tostring(err):match("%(valid: ([^)]*)%)")
  if not list then return nil end
  local names = {}
  for n in list:gmatch("[%w_]+") do names[#names + 1] = n end
  return names
end

-- The first input an eager call of the layer takes, or nil.
local function working_input(mx, expr)
  local env = setmetatable({ nn = mx.gluon.nn, rnn = mx.gluon.rnn, nd = mx.nd, mx = mx },
    { __index = _G })
  for _, inp in ipairs(M.INPUTS) do
    local f = loadstring("local b = " .. expr .. "\nb:initialize()\nlocal y = b(" .. inp .. ")\n"
      .. "if type(y) == 'table' and not nd.is_tensor(y) then y = y[1] end\n"
      .. "assert(nd.is_tensor(y)) y:wait_to_read() return true")
    setfenv(f, env)
    if pcall(f) then return inp end
  end
  return nil
end

-- The hybridized-vs-eager check (a Lua chunk's setup and a call returning the verdict).
local HYB_SETUP = [[
local function make()
  mx.random.seed(7)
  local b = CTOR
  b:initialize(mx.init.Uniform(0.5))
  return b
end
local function flat(t) return t:astype("float64"):reshape({ -1 }):tolist() end
local function run(b, k, train, seed)
  mx.random.seed(seed or 11)
  local x = (INPUT):astype("float32")
  local is_index = NAME == "Embedding"
  if not is_index then x:attach_grad() end
  local l
  local function body()
    for i = 1, k do
      local xi = is_index and x or (x * (1 + 0.25 * (i - 1)))
      local y = b(xi)
      if type(y) == "table" and not nd.is_tensor(y) then y = y[1] end
      local s = (y * y):sum()
      l = l and l + s or s
    end
  end
  mx.autograd.record(body, { train_mode = train })
  l:backward()
  local out = { flat(l) }
  if not is_index then out[#out + 1] = flat(x:grad()) end
  for _, p in b:collect_params():items() do
    if p.grad_req ~= "null" then out[#out + 1] = flat(p:grad()) end
    out[#out + 1] = flat(p:data())
  end
  return out
end
local function same(a, b)
  if #a ~= #b then return false, "different counts " .. #a .. " vs " .. #b end
  for i = 1, #a do
    if #a[i] ~= #b[i] then return false, "value " .. i .. ": sizes " .. #a[i] .. " vs " .. #b[i] end
    for j = 1, #a[i] do
      local u, v = a[i][j], b[i][j]
      if not (math.abs(u - v) <= 1e-4 * (1 + math.abs(v)) or (u ~= u and v ~= v)) then
        return false, string.format("value %d element %d: hybridized %.9g, eager %.9g", i, j, u, v)
      end
    end
  end
  return true
end
local function hybrid_matches(k, train)
  local be, bh = make(), make()
  bh:hybridize()
  -- two steps: the second replays the graph the first traced (the first's gradient is
  -- the trace's eager tape)
  run(be, k, train)
  run(bh, k, train)
  local want, got = run(be, k, train), run(bh, k, train)
  local ok, why = same(got, want)
  if not ok and train then
    -- a random layer (dropout): two eager runs with other seeds differ too; compare only
    -- in predict mode then
    local b2 = make()
    run(b2, k, train, 12)
    local other = run(b2, k, train, 12)
    if not same(other, want) then return true end
  end
  if not ok then error(NAME .. " hybridized differs from eager (" .. k .. " call(s) per record, "
    .. (train and "train" or "predict") .. " mode): " .. why, 0) end
  return true
end
]]

function M.cases(mx)
  local nn, rnn = mx.gluon.nn, mx.gluon.rnn
  local cases = {}
  local function case(t) cases[#cases + 1] = t end
  local groups = {
    { "nn", sorted_blocks(nn) },
    { "rnn", sorted_blocks(rnn, function(k) return k:find("Cell") == nil end) },
  }
  local stats = { layers = 0, options = 0, hybrid = 0, no_call = {} }
  for _, g in ipairs(groups) do
    local cls_in = g[1]
    for _, name in ipairs(g[2]) do
      stats.layers = stats.layers + 1
      local base_opts = M.CTOR[name] and M.CTOR[name][3] or "{}"
      local expr, op = ctor_of(name, cls_in)
      local names = { name, op }
      -- options: each with every wrong value
      local probe = ctor_of(name, cls_in, with_opt(base_opts, "__sweep_probe = 1"))
      local opts = options_of(mx, probe)
      for _, o in ipairs(opts or {}) do
        stats.options = stats.options + 1
        for _, v in ipairs(BAD) do
          local e = ctor_of(name, cls_in, with_opt(base_opts, o .. " = " .. v))
          case { id = name .. "/option " .. o .. "=" .. v, names = names, call = e, expect = "either",
            check = "type(r) == 'table' and r.__is_block == true" }
        end
      end
      -- hybridized against eager
      local inp = working_input(mx, expr)
      if not inp then
        stats.no_call[#stats.no_call + 1] = name
      else
        local setup = HYB_SETUP:gsub("CTOR", function() return expr end)
          :gsub("INPUT", function() return inp end)
          :gsub("NAME", function() return string.format("%q", name) end)
        for k = 1, 3 do
          for _, train in ipairs({ true, false }) do
            stats.hybrid = stats.hybrid + 1
            local mode = train and "train" or "predict"
            case { id = name .. "/hybridized = eager, " .. k .. " call(s), " .. mode,
              names = names, setup = setup, call = "hybrid_matches(" .. k .. ", " .. tostring(train) .. ")",
              expect = "result", check = "r == true" }
          end
        end
      end
    end
  end
  return cases, stats
end

return M
