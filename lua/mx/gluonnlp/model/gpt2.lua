-- mx.gluonnlp.model GPT-2: GluonNLP's GPT2Model (pre-norm decoder-only transformer, tanh
-- GELU, learned positions, logits tied to the token embedding) with its parameter names
-- (_embed, _pos_embed, _self_attention_layers.i._multi_head_qkv_proj / _out_proj,
-- _ffn_layers.i._hidden_map / _out_map, _attn_ln.i, _ffn_ln.i, _final_ln), a key/value
-- cache for incremental decoding, and Hugging Face GPT-2 checkpoints by name map.
--
-- forward(data (N, T) token ids, states=nil) -> logits (N, T, vocab), new_states: the
-- list {k_1, v_1, ..., k_L, v_L}, each (N, heads, past + T, units / heads). Passing the
-- states back continues the sequence (positions count on from the cached length).
local nd = require("mx.nd")
local autograd = require("mx.autograd")
local block = require("mx.gluon.block")
local nn = require("mx.gluon.nn")
local check_opts = require("mx.core.class").check_opts
local json = require("mx.gluonnlp._json")

local Block, HybridBlock = block.Block, block.HybridBlock
local M = {}

local function mx_normal(sigma) return require("mx.initializer").Normal(sigma) end

---------------------------------------------------------------- layers
local Attn = HybridBlock:extend("GPT2SelfAttentionLayer")
M.GPT2SelfAttentionLayer = Attn
function Attn:__init(units, heads, dropout)
  Block.__init(self)
  self._units, self._heads = units, heads
  self._d = units / heads
  self._scale = 1 / math.sqrt(self._d)
  self._multi_head_qkv_proj = nn.Dense(3 * units, { flatten = false, in_units = units })
  self._out_proj = nn.Dense(units, { flatten = false, in_units = units })
  if dropout > 0 then self._dropout_layer = nn.Dropout(dropout) end
end

-- (N, T, units) -> (N, heads, T, d)
local function split_heads(x, n, t, h, d)
  return nd.transpose(nd.reshape(x, { n, t, h, d }), { axes = { 1, 3, 2, 4 } })
end

-- causal mask (Tq, past + Tq): query i (absolute position past + i) sees keys <= it
local mask_cache = {}
local function causal(tq, tk)
  local key = tq * 65536 + tk
  local m = mask_cache[key]
  if m then return m end
  local past = tk - tq
  local r = nd.reshape(nd.arange(past, past + tq), { tq, 1 })
  local c = nd.reshape(nd.arange(0, tk), { 1, tk })
  -- 0 where visible, -1e9 where masked (added to the scores)
  m = nd.mul_scalar(nd.sub_scalar(nd.lesser_equal(c, r), { scalar = 1 }), { scalar = 1e9 })
  if tq * tk <= 1048576 then
    mask_cache[key] = m
    nd.keep(m)
  end
  return m
end

function Attn:forward(x, state_k, state_v)
  local s = x:shape()
  local n, t = s[1], s[2]
  local h, d = self._heads, self._d
  local qkv = self._multi_head_qkv_proj(x)
  local q, k, v = nd.split(qkv, { num_outputs = 3, axis = 3 })
  q, k, v = split_heads(q, n, t, h, d), split_heads(k, n, t, h, d), split_heads(v, n, t, h, d)
  if state_k ~= nil then
    k = nd.concat(state_k, k, { dim = 3 })
    v = nd.concat(state_v, v, { dim = 3 })
  end
  local tk = k:shape()[3]
  local q3 = nd.reshape(q, { n * h, t, d })
  local k3 = nd.reshape(k, { n * h, tk, d })
  local v3 = nd.reshape(v, { n * h, tk, d })
  local scores = nd.batch_dot(q3, k3, { transpose_b = true })
  scores = nd.mul_scalar(scores, { scalar = self._scale })
  if t > 1 then scores = nd.add(scores, causal(t, tk)) end
  local att = nd.softmax(scores, { axis = -1 })
  if self._dropout_layer then att = self._dropout_layer(att) end
  local out = nd.batch_dot(att, v3)
  out = nd.reshape(nd.transpose(nd.reshape(out, { n, h, t, d }), { axes = { 1, 3, 2, 4 } }), { n, t, h * d })
  return self._out_proj(out), k, v
end

local FFN = HybridBlock:extend("GPT2FFNLayer")
M.GPT2FFNLayer = FFN
function FFN:__init(units, hidden)
  Block.__init(self)
  self._hidden_map = nn.Dense(hidden, { flatten = false, in_units = units })
  self._out_map = nn.Dense(units, { flatten = false, in_units = hidden })
end
local GELU_TANH = { approximation = "tanh" }
local GELU_FC = { flatten = false, act_type = "gelu_tanh" }
function FFN:forward(x)
  if autograd.is_recording() then return self._out_map(nd.gelu(self._hidden_map(x), GELU_TANH)) end
  -- inference: gelu as the product's post-op, no second pass over the hidden layer
  local l = self._hidden_map
  GELU_FC.num_hidden = l.weight:data():shape()[1]
  return self._out_map(nd.fully_connected(x, l.weight:data(), l.bias:data(), GELU_FC))
end

---------------------------------------------------------------- GPT2Model
local GPT2Model = HybridBlock:extend("GPT2Model")
M.GPT2Model = GPT2Model
local OPTS = { units = true, vocab_size = true, max_length = true, num_layers = true,
  num_heads = true, dropout = true, layer_norm_eps = true, hidden_size = true }

-- GPT2Model{units=768, vocab_size=50257, max_length=1024, num_layers=12, num_heads=12,
-- dropout=0, layer_norm_eps=1e-5, hidden_size=4*units}
function GPT2Model:__init(o)
  Block.__init(self)
  o = check_opts("GPT2Model", o, OPTS, 3)
  local c = { units = o.units or 768, vocab_size = o.vocab_size or 50257, max_length = o.max_length or 1024,
    num_layers = o.num_layers or 12, num_heads = o.num_heads or 12, dropout = o.dropout or 0,
    layer_norm_eps = o.layer_norm_eps or 1e-5 }
  c.hidden_size = o.hidden_size or 4 * c.units
  if c.units % c.num_heads ~= 0 then
    error(string.format("GPT2Model: units (%d) must be divisible by num_heads (%d)", c.units, c.num_heads), 3)
  end
  self.config = c
  self._pos_embed = nn.Embedding(c.max_length, c.units, { weight_initializer = mx_normal(0.01) })
  self._embed = nn.Embedding(c.vocab_size, c.units, { weight_initializer = mx_normal(0.02) })
  self._self_attention_layers = nn.Sequential()
  self._ffn_layers = nn.Sequential()
  self._attn_ln = nn.Sequential()
  self._ffn_ln = nn.Sequential()
  local function ln() return nn.LayerNorm({ in_channels = c.units, epsilon = c.layer_norm_eps }) end
  for _ = 1, c.num_layers do
    self._self_attention_layers:add(Attn(c.units, c.num_heads, c.dropout))
    self._ffn_layers:add(FFN(c.units, c.hidden_size))
    self._attn_ln:add(ln())
    self._ffn_ln:add(ln())
  end
  self._final_ln = ln()
  if c.dropout > 0 then self._dropout = nn.Dropout(c.dropout) end
  self._fc_opts = { num_hidden = c.vocab_size, no_bias = true, flatten = false }
end

function GPT2Model:forward(data, states)
  if not nd.is_tensor(data) or #data:shape() ~= 2 then
    error("GPT2Model: data must be an (N, T) tensor of token ids", 2)
  end
  local s = data:shape()
  local n, t = s[1], s[2]
  local c = self.config
  local past = states and states[1]:shape()[3] or 0
  if past + t > c.max_length then
    error(string.format("GPT2Model: %d cached + %d new positions exceed max_length %d", past, t,
      c.max_length), 2)
  end
  local pos = nd.broadcast_to(nd.reshape(nd.arange(past, past + t, { dtype = "int32" }), { 1, t }),
    { shape = { n, t } })
  local x = nd.add(self._embed(data), self._pos_embed(pos))
  if self._dropout then x = self._dropout(x) end
  local attn = self._self_attention_layers:children()
  local ffn = self._ffn_layers:children()
  local aln, fln = self._attn_ln:children(), self._ffn_ln:children()
  local new_states = {}
  for i = 1, c.num_layers do
    local sk, sv
    if states then sk, sv = states[2 * i - 1], states[2 * i] end
    local hdn, k, v = attn[i](aln[i](x), sk, sv)
    x = nd.add(x, hdn)
    x = nd.add(x, ffn[i](fln[i](x)))
    new_states[2 * i - 1], new_states[2 * i] = k, v
  end
  x = self._final_ln(x)
  local logits = nd.fully_connected(x, self._embed.weight:data(), self._fc_opts)
  return logits, new_states
end

M.CONFIGS = {
  gpt2_117m = { units = 768, max_length = 1024, num_heads = 12, num_layers = 12 },
  gpt2_345m = { units = 1024, max_length = 1024, num_heads = 16, num_layers = 24 },
}

function M.get_gpt2(name, o)
  o = o or {}
  local c = M.CONFIGS[name]
  if not c then error("get_model: unknown GPT-2 model '" .. tostring(name) .. "' (gpt2_117m, gpt2_345m)",
    3) end
  if o.pretrained then
    error("get_model: luamx downloads nothing; load a Hugging Face GPT-2 directory with "
      .. "nlp.model.gpt2.from_hf(dir)", 3)
  end
  local args = {}
  for k, v in pairs(c) do args[k] = v end
  for k, v in pairs(o) do if k ~= "pretrained" then args[k] = v end end
  return GPT2Model(args)
end

---------------------------------------------------------------- Hugging Face checkpoints
-- hf_name_map(name) -> GluonNLP name, transpose (HF's Conv1D weights are (in, out))
function M.hf_name_map(name)
  local s = name:gsub("^transformer%.", "")
  if s == "wte.weight" then return "_embed.weight" end
  if s == "wpe.weight" then return "_pos_embed.weight" end
  if s == "ln_f.weight" then return "_final_ln.gamma" end
  if s == "ln_f.bias" then return "_final_ln.beta" end
  local i, rest = s:match("^h%.(%d+)%.(.+)$")
  if not i then return nil end
  local map = {
    ["attn.c_attn.weight"] = { "_self_attention_layers.%s._multi_head_qkv_proj.weight", true },
    ["attn.c_attn.bias"] = { "_self_attention_layers.%s._multi_head_qkv_proj.bias" },
    ["attn.c_proj.weight"] = { "_self_attention_layers.%s._out_proj.weight", true },
    ["attn.c_proj.bias"] = { "_self_attention_layers.%s._out_proj.bias" },
    ["mlp.c_fc.weight"] = { "_ffn_layers.%s._hidden_map.weight", true },
    ["mlp.c_fc.bias"] = { "_ffn_layers.%s._hidden_map.bias" },
    ["mlp.c_proj.weight"] = { "_ffn_layers.%s._out_map.weight", true },
    ["mlp.c_proj.bias"] = { "_ffn_layers.%s._out_map.bias" },
    ["ln_1.weight"] = { "_attn_ln.%s.gamma" }, ["ln_1.bias"] = { "_attn_ln.%s.beta" },
    ["ln_2.weight"] = { "_ffn_ln.%s.gamma" }, ["ln_2.bias"] = { "_ffn_ln.%s.beta" },
  }
  local e = map[rest]
  if not e then return nil end
  return e[1]:format(i), e[2]
end

-- from_hf(dir) -> model, config: config.json + model.safetensors as Hugging Face writes
-- GPT-2 (GPT2LMHeadModel or GPT2Model); the tokenizer comes from
-- nlp.data.GPT2BPETokenizer (its vocab.json + merges.txt, or gpt2.tiktoken)
function M.from_hf(dir)
  local cfg = json.read_file(dir .. "/config.json", 2)
  if cfg.model_type and cfg.model_type ~= "gpt2" then
    error("from_hf: " .. dir .. " holds a '" .. tostring(cfg.model_type) .. "' model, not gpt2", 2)
  end
  local model = GPT2Model({ units = cfg.n_embd, vocab_size = cfg.vocab_size, max_length = cfg.n_positions,
    num_layers = cfg.n_layer, num_heads = cfg.n_head, layer_norm_eps = cfg.layer_norm_epsilon,
    hidden_size = cfg.n_inner ~= json.null and cfg.n_inner or nil })
  model:initialize()
  local loaded = nd.load(dir .. "/model.safetensors")
  local params = model:collect_params()
  local seen = {}
  for k, v in pairs(loaded) do
    local to, transpose = M.hf_name_map(k)
    if to then
      local p = params[to]
      if not p then error("from_hf: " .. k .. " maps to " .. to .. ", which the model lacks", 2) end
      if transpose then v = nd.transpose(v) end
      local ps, vs = p:data():shape(), v:shape()
      if table.concat(ps, "x") ~= table.concat(vs, "x") then
        error(string.format("from_hf: %s is (%s), %s expects (%s)", k, table.concat(vs, ", "), to,
          table.concat(ps, ", ")), 2)
      end
      p:set_data(v:astype(p.dtype))
      seen[to] = true
    end
  end
  for name in params:items() do
    if not seen[name] then error("from_hf: " .. dir .. "/model.safetensors has no weight for " .. name, 2) end
  end
  return model, cfg
end

---------------------------------------------------------------- decoding
-- decoder(model) -> the samplers' decoder: (B,) ids + the cache -> log-probabilities of
-- the next token (B, V) and the grown cache
function M.decoder(model)
  return function(step_input, states)
    local logits, new_states = model(nd.reshape(step_input, { -1, 1 }), states)
    local V = logits:shape()[3]
    return nd.log_softmax(nd.reshape(logits, { -1, V }), { axis = -1 }), new_states
  end
end

-- prime(model, prompts) -> last ids (N,), states: runs all but the last token of each
-- prompt (a Lua list of equally long id lists) through the model to fill the cache
function M.prime(model, prompts)
  local n, len = #prompts, #prompts[1]
  if len < 1 then error("prime: empty prompt", 2) end
  local last, flat = {}, {}
  for i, p in ipairs(prompts) do
    if #p ~= len then error("prime: prompts must have the same length", 2) end
    last[i] = p[len]
    for t = 1, len - 1 do flat[#flat + 1] = p[t] end
  end
  local states
  if len > 1 then
    local _
    _, states = model(nd.array(flat, { dtype = "int32" }):reshape({ n, len - 1 }))
  end
  return last, states
end

-- generate(model, prompts, {sampler=, beam_size=1, max_new_tokens=20, eos_id=, temperature=,
-- top_k=, top_p=, seed=, alpha=, K=}) -> a list of id lists (each prompt + its new tokens,
-- eos included, the best beam): beam search when beam_size > 1 or no sampling option
-- is given (beam_size 1: greedy), else SequenceSampler
function M.generate(model, prompts, o)
  o = o or {}
  local S = require("mx.gluonnlp.model.sequence_sampler")
  local last, states = M.prime(model, prompts)
  local dec = M.decoder(model)
  local maxlen = o.max_new_tokens or 20
  local sampler
  if o.temperature or o.top_k or o.top_p or o.sample then
    sampler = S.SequenceSampler(1, dec, o.eos_id, { max_length = maxlen, temperature = o.temperature,
      top_k = o.top_k, top_p = o.top_p, seed = o.seed })
  else
    sampler = S.BeamSearchSampler(o.beam_size or 1, dec, o.eos_id, { max_length = maxlen,
      scorer = S.BeamSearchScorer({ alpha = o.alpha, K = o.K }) })
  end
  local samples, _, valid = sampler(last, states)
  local sl, vl = samples:tolist(), valid:tolist()
  local L, K = samples:shape()[3], samples:shape()[2]
  local out = {}
  for i, p in ipairs(prompts) do
    local r = {}
    for t = 1, #p - 1 do r[t] = p[t] end
    local base = (i - 1) * K * L
    for t = 1, vl[(i - 1) * K + 1] do r[#r + 1] = sl[base + t] end
    out[i] = r
  end
  return out
end

return M
