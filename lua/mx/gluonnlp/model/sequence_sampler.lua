-- mx.gluonnlp.model sequence samplers: GluonNLP 0.10's BeamSearchScorer,
-- BeamSearchSampler (beam search with GNMT's length penalty) and SequenceSampler
-- (sampling with temperature, top-k and top-p), plus greedy decoding (beam_size 1).
--
-- A decoder is a function decoder(step_input, states) -> log_probs, new_states:
-- step_input (B,) int32 token ids (0-based), log_probs (B, V) log-probabilities of the
-- next token, states tensors whose first axis is B, in lists or tables (nested; other
-- values pass through).
-- The samplers tile inputs and states beam_size times along that axis and reorder them
-- as beams are chosen.
--
-- sampler(inputs (N,) ids, states) -> samples (N, beam, L) int32 (the input first, -1
-- after a beam ended), scores (N, beam) float32, valid_length (N, beam) int32 (counting
-- the input and the eos). Beams are sorted best first.
local ffi = require("ffi")
local nd = require("mx.nd")
local U = require("mx.gluonnlp._util")
local gs = require("mx.gluon.data.sampler")

local M = {}
local NEG = -1e30

---------------------------------------------------------------- scorer
-- BeamSearchScorer{alpha=1.0, K=5.0}: score(log_prob_sum, length) =
-- log_prob_sum / ((K + length)^alpha / (K + 1)^alpha)
local BeamSearchScorer = U.class("BeamSearchScorer")
M.BeamSearchScorer = BeamSearchScorer
function BeamSearchScorer:__init(o)
  o = U.check_opts("BeamSearchScorer", o, { alpha = true, K = true }, 3)
  self.alpha, self.K = o.alpha or 1.0, o.K or 5.0
end
function BeamSearchScorer:penalty(length)
  return ((self.K + length) ^ self.alpha) / ((self.K + 1) ^ self.alpha)
end

---------------------------------------------------------------- state plumbing
-- fn over every tensor of a state (lists and tables of tensors, nested; other values
-- as they are)
local function map_states(states, fn)
  if nd.is_tensor(states) then return fn(states) end
  if type(states) ~= "table" then return states end
  local out = {}
  for k, v in pairs(states) do out[k] = map_states(v, fn) end
  return out
end

-- rows (0-based) of x along axis 1, in the order given
local function take_rows(x, rows_t)
  return nd.take(x, rows_t, { axis = 1 })
end

local function rows_tensor(rows)
  local t = {}
  for i = 1, #rows do t[i] = rows[i] + 1 end -- take is 1-based
  return nd.array(t, { dtype = "int32" })
end

local function tile(x, beam)
  local s = x:shape()
  local n = s[1]
  local rows = {}
  for b = 0, n - 1 do for _ = 1, beam do rows[#rows + 1] = b end end
  return take_rows(x, rows_tensor(rows))
end

local function check_decoder_out(lp, B, who)
  if not nd.is_tensor(lp) then error(who
    .. ": the decoder must return a (B, V) tensor of log-probabilities", 3) end
  local s = lp:shape()
  if #s ~= 2 or s[1] ~= B then
    error(string.format("%s: the decoder returned (%s) log-probabilities for %d rows (B, V expected)",
      who, table.concat(s, ", "), B), 3)
  end
  return s[2]
end

local function as_ids(inputs, who)
  if nd.is_tensor(inputs) then return inputs:astype("int32"):tolist() end
  if type(inputs) == "table" then return inputs end
  error(who .. ": inputs must be a (N,) tensor or a Lua list of token ids", 3)
end

-- pack Lua rows into the (N, beam, L) results
local function results(N, beam, seqs, scores, lens)
  local L = 0
  for i = 1, N * beam do if #seqs[i] > L then L = #seqs[i] end end
  local flat = {}
  for i = 1, N * beam do
    local s = seqs[i]
    for t = 1, L do flat[(i - 1) * L + t] = s[t] or -1 end
  end
  return nd.array(flat, { dtype = "int32" }):reshape({ N, beam, L }),
    nd.array(scores, { dtype = "float32" }):reshape({ N, beam }),
    nd.array(lens, { dtype = "int32" }):reshape({ N, beam })
end

---------------------------------------------------------------- beam search
local BeamSearchSampler = U.class("BeamSearchSampler")
M.BeamSearchSampler = BeamSearchSampler

-- BeamSearchSampler(beam_size, decoder, eos_id, {scorer=BeamSearchScorer(),
-- max_length=100, min_length=0}): eos_id nil means sequences end only at max_length
-- new tokens; min_length forbids eos before that many new tokens.
function BeamSearchSampler:__init(beam_size, decoder, eos_id, o)
  o = U.check_opts("BeamSearchSampler", o, { scorer = true, max_length = true, min_length = true }, 3)
  if type(beam_size) ~= "number" or beam_size < 1 or beam_size % 1 ~= 0 then
    error("BeamSearchSampler: beam_size must be a positive integer, got " .. tostring(beam_size), 3)
  end
  if type(decoder) ~= "function" and not (type(decoder) == "table" and getmetatable(decoder)) then
    error("BeamSearchSampler: decoder must be callable", 3)
  end
  self.beam_size, self.decoder, self.eos_id = beam_size, decoder, eos_id
  self.scorer = o.scorer or BeamSearchScorer()
  self.max_length = o.max_length or 100
  self.min_length = o.min_length or 0
end

function BeamSearchSampler:__call(inputs, states)
  local who = "BeamSearchSampler"
  local ids = as_ids(inputs, who)
  local N, K = #ids, self.beam_size
  local B = N * K
  states = map_states(states, function(x) return tile(x, K) end)
  local seqs, lens, alive, raw, scores = {}, {}, {}, {}, {}
  local step = {}
  for b = 1, N do
    for k = 1, K do
      local i = (b - 1) * K + k
      seqs[i] = { ids[b] }
      lens[i], alive[i], raw[i] = 1, true, 0
      scores[i] = k == 1 and 0 or NEG -- one live beam at the start: no duplicates
      step[i] = ids[b]
    end
  end
  local scorer, eos = self.scorer, self.eos_id
  local cand_ids = ffi.new("int32_t[?]", 2 * K)
  local cand_sc = ffi.new("double[?]", 2 * K)
  for t = 1, self.max_length do
    local lp, new_states = self.decoder(nd.array(step, { dtype = "int32" }), states)
    local V = check_decoder_out(lp, B, who)
    local p = lp:astype("float32"):data_ptr()
    local pen = scorer:penalty(t)
    local new_seqs, new_lens, new_alive, new_raw, new_scores, pick = {}, {}, {}, {}, {}, {}
    for b = 1, N do
      -- the K best of: each live beam's continuations, each finished beam as it is
      local nc = 0
      local function offer(sc, src, word)
        -- insertion into a sorted list of at most K
        if nc == K and sc <= cand_sc[K - 1] then return end
        local j = nc < K and nc or K - 1
        while j > 0 and cand_sc[j - 1] < sc do
          cand_sc[j], cand_ids[2 * j], cand_ids[2 * j + 1] = cand_sc[j - 1], cand_ids[2 * j - 2],
            cand_ids[2 * j - 1]
          j = j - 1
        end
        cand_sc[j], cand_ids[2 * j], cand_ids[2 * j + 1] = sc, src, word
        if nc < K then nc = nc + 1 end
      end
      for k = 1, K do
        local i = (b - 1) * K + k
        if alive[i] then
          if scores[i] > NEG / 2 then
            local base = (i - 1) * V
            local r = raw[i]
            for w = 0, V - 1 do
              if not (w == eos and t <= self.min_length) then
                local sc = (r + p[base + w]) / pen
                if nc < K or sc > cand_sc[K - 1] then offer(sc, i, w) end
              end
            end
          end
        else
          offer(scores[i], i, -1)
        end
      end
      for j = 0, K - 1 do
        local dst = (b - 1) * K + j + 1
        if j < nc then
          local src, w = cand_ids[2 * j], cand_ids[2 * j + 1]
          local s = {}
          for q = 1, #seqs[src] do s[q] = seqs[src][q] end
          if w >= 0 then
            s[#s + 1] = w
            new_lens[dst] = lens[src] + 1
            new_alive[dst] = w ~= eos
            new_raw[dst] = raw[src] + p[(src - 1) * V + w]
          else
            s[#s + 1] = -1
            new_lens[dst] = lens[src]
            new_alive[dst] = false
            new_raw[dst] = raw[src]
          end
          new_seqs[dst], new_scores[dst], pick[dst] = s, cand_sc[j], src - 1
        else -- fewer candidates than beams (tiny vocabularies): a dead copy
          local src = (b - 1) * K + 1
          new_seqs[dst], new_lens[dst], new_alive[dst] = { unpack(seqs[src]) }, lens[src], false
          new_raw[dst], new_scores[dst], pick[dst] = raw[src], NEG, src - 1
        end
        step[dst] = math.max(new_seqs[dst][#new_seqs[dst]], 0)
      end
    end
    seqs, lens, alive, raw, scores = new_seqs, new_lens, new_alive, new_raw, new_scores
    local rt = rows_tensor(pick)
    states = map_states(new_states, function(x) return take_rows(x, rt) end)
    local any = false
    for i = 1, B do if alive[i] then any = true break end end
    if not any then break end
  end
  -- beams still alive at max_length end with eos (when there is one), as GluonNLP does
  if eos ~= nil then
    for i = 1, B do
      if alive[i] then
        seqs[i][#seqs[i] + 1] = eos
        lens[i] = lens[i] + 1
      end
    end
  end
  return results(N, K, seqs, scores, lens)
end

---------------------------------------------------------------- sampling
local SequenceSampler = U.class("SequenceSampler")
M.SequenceSampler = SequenceSampler

-- SequenceSampler(beam_size, decoder, eos_id, {max_length=100, temperature=1.0,
-- top_k=nil, top_p=nil, min_length=0, seed=}): beam_size independent samples per input;
-- each step draws from softmax(log_probs / temperature), restricted to the top_k most
-- likely tokens and/or the smallest set whose probability reaches top_p. Scores are
-- the sums of the drawn tokens' log-probabilities (as the decoder gave them).
function SequenceSampler:__init(beam_size, decoder, eos_id, o)
  o = U.check_opts("SequenceSampler", o, { max_length = true, temperature = true, top_k = true,
    top_p = true, min_length = true, seed = true }, 3)
  if type(beam_size) ~= "number" or beam_size < 1 or beam_size % 1 ~= 0 then
    error("SequenceSampler: beam_size must be a positive integer, got " .. tostring(beam_size), 3)
  end
  local temp = o.temperature or 1.0
  if type(temp) ~= "number" or temp <= 0 then
    error("SequenceSampler: temperature must be a positive number, got " .. tostring(temp), 3)
  end
  if o.top_p ~= nil and (type(o.top_p) ~= "number" or o.top_p <= 0 or o.top_p > 1) then
    error("SequenceSampler: top_p must be in (0, 1], got " .. tostring(o.top_p), 3)
  end
  if o.top_k ~= nil and (type(o.top_k) ~= "number" or o.top_k < 1) then
    error("SequenceSampler: top_k must be a positive integer, got " .. tostring(o.top_k), 3)
  end
  self.beam_size, self.decoder, self.eos_id = beam_size, decoder, eos_id
  self.max_length, self.temperature = o.max_length or 100, temp
  self.top_k, self.top_p, self.min_length = o.top_k, o.top_p, o.min_length or 0
  self._rng = gs._Rng(o.seed or gs._draw_seed())
end

local TWO53 = 9007199254740992
local function uniform(rng) return (rng:int(TWO53) - 1) / TWO53 end

-- Moves the largest values of w[ord[0..n-1]] to the front and returns how many: the
-- fewest whose count reaches k or whose mass reaches need (ties at the boundary taken in
-- their order). Expected O(n): a three-way quickselect that tracks count and mass.
local function select_top(w, ord, n, k, need, rng)
  local lo, hi = 0, n - 1
  local cnt, acc = 0, 0 -- taken so far: ord[0 .. lo-1]
  while lo <= hi do
    local pv = w[ord[lo + rng:int(hi - lo + 1) - 1]]
    -- partition ord[lo..hi]: > pv | == pv | < pv
    local i, lt, gt = lo, lo, hi
    while i <= gt do
      local v = w[ord[i]]
      if v > pv then
        ord[i], ord[lt] = ord[lt], ord[i]
        lt, i = lt + 1, i + 1
      elseif v < pv then
        ord[i], ord[gt] = ord[gt], ord[i]
        gt = gt - 1
      else
        i = i + 1
      end
    end
    local mgt = 0
    for j = lo, lt - 1 do mgt = mgt + w[ord[j]] end
    local ngt = lt - lo
    if cnt + ngt >= k or acc + mgt >= need then
      if ngt == 0 then return lo end
      hi = lt - 1 -- the answer lies within the larger part
    else
      cnt, acc = cnt + ngt, acc + mgt
      -- take equal values one at a time
      local j = lt
      while j <= gt do
        cnt, acc = cnt + 1, acc + pv
        j = j + 1
        if cnt >= k or acc >= need then return j end
      end
      lo = gt + 1
    end
  end
  return lo
end

-- one draw from row p[base .. base+V-1] (log-probs)
local order_buf, order_cap = nil, 0
local prob_buf = nil
local function draw(self, p, base, V, t)
  local temp, rng = self.temperature, self._rng
  if V > order_cap then
    order_cap = V
    order_buf = ffi.new("int32_t[?]", V)
    prob_buf = ffi.new("double[?]", V)
  end
  local mx_ = -math.huge
  for w = 0, V - 1 do
    local v = p[base + w] / temp
    if self.eos_id == w and t <= self.min_length then v = -math.huge end
    prob_buf[w] = v
    if v > mx_ then mx_ = v end
  end
  local total = 0
  for w = 0, V - 1 do
    local e = math.exp(prob_buf[w] - mx_)
    prob_buf[w] = e
    total = total + e
  end
  if not (self.top_k or self.top_p) then
    local u = uniform(rng) * total
    local acc = 0
    for w = 0, V - 1 do
      acc = acc + prob_buf[w]
      if u < acc then return w end
    end
    return V - 1
  end
  -- top_k first, then top_p over what is left (renormalised), as transformers does
  local ord = order_buf
  for w = 0, V - 1 do ord[w] = w end
  local n = V
  if self.top_k and self.top_k < V then n = select_top(prob_buf, ord, V, self.top_k, math.huge, rng) end
  local mass = 0
  for j = 0, n - 1 do mass = mass + prob_buf[ord[j]] end
  if self.top_p and self.top_p < 1 then
    n = select_top(prob_buf, ord, n, math.huge, self.top_p * mass, rng)
    mass = 0
    for j = 0, n - 1 do mass = mass + prob_buf[ord[j]] end
  end
  local u = uniform(rng) * mass
  local acc = 0
  for j = 0, n - 1 do
    acc = acc + prob_buf[ord[j]]
    if u < acc then return ord[j] end
  end
  return ord[n - 1]
end

function SequenceSampler:__call(inputs, states)
  local who = "SequenceSampler"
  local ids = as_ids(inputs, who)
  local N, K = #ids, self.beam_size
  local B = N * K
  states = map_states(states, function(x) return tile(x, K) end)
  local seqs, lens, alive, scores, step = {}, {}, {}, {}, {}
  for b = 1, N do
    for k = 1, K do
      local i = (b - 1) * K + k
      seqs[i], lens[i], alive[i], scores[i], step[i] = { ids[b] }, 1, true, 0, ids[b]
    end
  end
  for t = 1, self.max_length do
    local lp, new_states = self.decoder(nd.array(step, { dtype = "int32" }), states)
    local V = check_decoder_out(lp, B, who)
    local p = lp:astype("float32"):data_ptr()
    local any = false
    for i = 1, B do
      local s = seqs[i]
      if alive[i] then
        local w = draw(self, p, (i - 1) * V, V, t)
        s[#s + 1] = w
        scores[i] = scores[i] + p[(i - 1) * V + w]
        lens[i] = lens[i] + 1
        if w == self.eos_id then alive[i] = false else any = true end
        step[i] = w
      else
        s[#s + 1] = -1
        step[i] = 0
      end
    end
    states = new_states
    if not any then break end
  end
  return results(N, K, seqs, scores, lens)
end

-- greedy(decoder, inputs, states, {max_length=, eos_id=}): beam search of width 1
function M.greedy(decoder, inputs, states, o)
  o = o or {}
  return BeamSearchSampler(1, decoder, o.eos_id, { max_length = o.max_length })(inputs, states)
end

return M
