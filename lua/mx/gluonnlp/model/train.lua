-- mx.gluonnlp.model.train — word2vec's skip-gram with negative sampling (GluonNLP 0.10's
-- nlp.model.train.SG, without subword units), and the data side it needs: skip-gram pairs
-- with word2vec's shrunk windows and frequent-word subsampling, and a unigram^0.75
-- negative sampler.
--
--   local sg = train.SG(vocab_size, 100)
--   for centers, contexts in train.skipgram_batches(sentences, counts, {...}) do
--     local negatives = sampler:draw(#centers * 5)
--     local loss = mx.autograd.record(function() return sg(c, x, n) end) ...
local nd = require("mx.nd")
local block = require("mx.gluon.block")
local nn = require("mx.gluon.nn")
local gs = require("mx.gluon.data.sampler")
local U = require("mx.gluonnlp._util")

local Block, HybridBlock = block.Block, block.HybridBlock
local M = {}

---------------------------------------------------------------- the model
local SG = HybridBlock:extend("SG")
M.SG = SG
-- SG(vocab_size, dim): embedding (the word vectors) and embedding_out (the context vectors);
-- word2vec initialises the first uniformly in [-0.5/dim, 0.5/dim] and the second to zeros
function SG:__init(vocab_size, dim)
  Block.__init(self)
  self._dim = dim
  self.embedding = nn.Embedding(vocab_size, dim,
    { weight_initializer = require("mx.initializer").Uniform(0.5 / dim) })
  self.embedding_out = nn.Embedding(vocab_size, dim, { weight_initializer = "zeros" })
end
-- forward(center (B,), context (B,), negatives (B, K)) -> loss (B,):
-- -log sigmoid(u_context . v_center) - sum_k log sigmoid(-u_negative_k . v_center)
function SG:forward(center, context, negatives)
  local v = self.embedding(center)                                   -- (B, D)
  local up = self.embedding_out(context)                             -- (B, D)
  local un = self.embedding_out(negatives)                           -- (B, K, D)
  local pos = nd.sum(nd.mul(v, up), { axis = 2 })                    -- (B)
  local neg = nd.reshape(nd.batch_dot(un, nd.expand_dims(v, { axis = 3 })), { -1, negatives:shape()[2] })
  -- log sigmoid(x) = -softrelu(-x)
  return nd.add(nd.softrelu(nd.neg(pos)), nd.sum(nd.softrelu(neg), { axis = 2 }))
end

---------------------------------------------------------------- sampling
-- UnigramCandidateSampler(counts (Lua list, id + 1 -> count), {power=0.75, seed=}):
-- draw(n) -> (n,) int32 ids with P(id) proportional to count^power (word2vec's table)
local Unigram = U.class("UnigramCandidateSampler")
M.UnigramCandidateSampler = Unigram
function Unigram:__init(counts, o)
  o = o or {}
  local power = o.power or 0.75
  local total = 0
  for i = 1, #counts do total = total + counts[i] ^ power end
  if total <= 0 then error("UnigramCandidateSampler: counts must have a positive entry", 3) end
  -- a table of 1e6 slots, each id taking its share (word2vec uses 1e8)
  local size = o.table_size or 1000000
  local ffi = require("ffi")
  local t = ffi.new("int32_t[?]", size)
  local i, acc = 1, counts[1] ^ power / total
  for s = 0, size - 1 do
    t[s] = i - 1
    if (s + 1) / size > acc and i < #counts then
      i = i + 1
      acc = acc + counts[i] ^ power / total
    end
  end
  self._t, self._size = t, size
  self._rng = gs._Rng(o.seed or gs._draw_seed())
end
function Unigram:draw(n)
  local out = nd.empty({ n }, { dtype = "int32" })
  local p = out:data_ptr()
  local t, size, rng = self._t, self._size, self._rng
  for k = 0, n - 1 do p[k] = t[rng:int(size) - 1] end
  return out
end

-- skipgram_batches(sentences, counts, {window=5, subsample=1e-4, batch_size=4096, seed=})
-- -> iterator of centers, contexts (Lua lists of ids) over one pass: sentences are lists of
-- 0-based ids; each kept word's window is drawn from 1..window (word2vec's shrinking);
-- a word of frequency f is kept with probability (sqrt(f / t) + 1) t / f (word2vec's
-- subsampling, t = subsample; 0 keeps every word)
function M.skipgram_batches(sentences, counts, o)
  o = o or {}
  local window, t = o.window or 5, o.subsample == nil and 1e-4 or o.subsample
  local bs = o.batch_size or 4096
  local rng = gs._Rng(o.seed or gs._draw_seed())
  local total = 0
  for i = 1, #counts do total = total + counts[i] end
  local keep = {}
  for i = 1, #counts do
    local f = counts[i] / total
    keep[i] = t > 0 and math.min(1, (math.sqrt(f / t) + 1) * t / f) or 1
  end
  local TWO53 = 9007199254740992
  local si, pos, kept = 0, 0, nil
  local centers, contexts = {}, {}
  local function next_sentence()
    si = si + 1
    local s = sentences[si]
    if not s then return false end
    kept = {}
    for _, id in ipairs(s) do
      if keep[id + 1] >= 1 or (rng:int(TWO53) - 1) / TWO53 < keep[id + 1] then kept[#kept + 1] = id end
    end
    pos = 0
    return true
  end
  return function()
    centers, contexts = {}, {}
    while #centers < bs do
      if kept == nil or pos >= #kept then
        if not next_sentence() then break end
      else
        pos = pos + 1
        local b = rng:int(window)
        local c = kept[pos]
        for j = math.max(1, pos - b), math.min(#kept, pos + b) do
          if j ~= pos then
            centers[#centers + 1] = c
            contexts[#contexts + 1] = kept[j]
          end
        end
      end
    end
    if #centers == 0 then return nil end
    return centers, contexts
  end
end

return M
