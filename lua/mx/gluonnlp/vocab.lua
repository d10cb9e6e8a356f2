-- mx.gluonnlp.Vocab — GluonNLP 0.10's vocabulary: tokens <-> ids.
--
-- Ids are 0-based values (what Embedding and checkpoints use); the Lua list
-- vocab.idx_to_token holds the token of id i at position i + 1. The order is
-- GluonNLP's: the unknown token (id 0), then padding, bos, eos and the reserved
-- tokens, then the counter's tokens by descending count (ties: ascending token).
-- A `false` special token means none (Python's None).
local U = require("mx.gluonnlp._util")
local json = require("mx.gluonnlp._json")
local file = require("mx.core.file")

local M = {}

local Vocab = U.class("Vocab")
M.Vocab = Vocab

local OPTS = { max_size = true, min_freq = true, unknown_token = true, padding_token = true,
  bos_token = true, eos_token = true, reserved_tokens = true, token_to_idx = true }

local function default(v, d)
  if v == nil then return d end
  return v or nil
end

-- Vocab(counter, opts): counter is a table token -> count (nlp.data.count_tokens) or nil.
-- opts: max_size, min_freq (1), unknown_token ('<unk>'), padding_token ('<pad>'),
-- bos_token ('<bos>'), eos_token ('<eos>'), reserved_tokens (list), token_to_idx (a
-- table token -> id moving those tokens to those ids, as GluonNLP does). Any other
-- key ending in _token names a further special token (cls_token = '[CLS]').
function Vocab:__init(counter, o)
  o = o or {}
  local extra = {}
  for k in pairs(o) do
    if type(k) == "string" and k:match("_token$") and not OPTS[k] then extra[k] = true end
  end
  U.check_opts("Vocab", o, OPTS, 3, extra)
  if counter ~= nil and type(counter) ~= "table" then
    error("Vocab: counter must be a table token -> count, got " .. type(counter), 3)
  end
  local min_freq = o.min_freq or 1
  if type(min_freq) ~= "number" or min_freq < 1 then
    error("Vocab: min_freq must be a number >= 1, got " .. tostring(min_freq), 3)
  end
  self.unknown_token = default(o.unknown_token, "<unk>")
  self.padding_token = default(o.padding_token, "<pad>")
  self.bos_token = default(o.bos_token, "<bos>")
  self.eos_token = default(o.eos_token, "<eos>")
  local specials = {}
  local seen = {}
  local function add_special(t, what)
    if t == nil then return end
    if type(t) ~= "string" then error("Vocab: " .. what .. " must be a string or false", 4) end
    if not seen[t] then seen[t] = true specials[#specials + 1] = t end
  end
  add_special(self.padding_token, "padding_token")
  add_special(self.bos_token, "bos_token")
  add_special(self.eos_token, "eos_token")
  local names = {}
  for k in pairs(extra) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do
    self[k] = o[k] or nil
    add_special(self[k], k)
  end
  for _, t in ipairs(o.reserved_tokens or {}) do
    if t == self.unknown_token then error("Vocab: reserved_tokens must not hold the unknown token", 3) end
    if seen[t] then error("Vocab: reserved token '" .. tostring(t) .. "' is listed twice", 3) end
    add_special(t, "reserved token")
  end
  self.reserved_tokens = #specials > 0 and specials or nil
  local itt, tti = {}, {}
  if self.unknown_token then itt[1] = self.unknown_token tti[self.unknown_token] = 0 end
  for _, t in ipairs(specials) do
    if tti[t] == nil then itt[#itt + 1] = t tti[t] = #itt - 1 end
  end
  if counter then
    local items = {}
    for tok, c in pairs(counter) do
      if type(tok) ~= "string" or type(c) ~= "number" then
        error("Vocab: counter entries must be string -> number, got " .. type(tok) .. " -> "
          .. type(c), 3)
      end
      if tti[tok] == nil and c >= min_freq then items[#items + 1] = { tok, c } end
    end
    table.sort(items, function(a, b)
      if a[2] ~= b[2] then return a[2] > b[2] end
      return a[1] < b[1]
    end)
    local cap = o.max_size and math.min(#items, o.max_size) or #items
    for i = 1, cap do
      itt[#itt + 1] = items[i][1]
      tti[items[i][1]] = #itt - 1
    end
  end
  self.idx_to_token, self.token_to_idx = itt, tti
  if o.token_to_idx then self:_reorder(o.token_to_idx, 3) end
end

-- moves the given tokens to the given ids, swapping with the tokens there
function Vocab:_reorder(map, level)
  local itt, tti = self.idx_to_token, self.token_to_idx
  for tok, id in pairs(map) do
    if tti[tok] == nil then error("Vocab: token_to_idx names '" .. tostring(tok)
      .. "', which is not in the vocabulary", level + 1) end
    if type(id) ~= "number" or id < 0 or id >= #itt or id % 1 ~= 0 then
      error("Vocab: token_to_idx id " .. tostring(id) .. " for '" .. tok .. "' is out of range 0.."
        .. (#itt - 1), level + 1)
    end
  end
  for tok, id in pairs(map) do
    local old = tti[tok]
    local other = itt[id + 1]
    itt[id + 1], itt[old + 1] = tok, other
    tti[tok], tti[other] = id, old
  end
end

function Vocab:size() return #self.idx_to_token end
Vocab.__len = Vocab.size

function Vocab:contains(token) return self.token_to_idx[token] ~= nil end

local function lookup(self, t, level)
  local id = self.token_to_idx[t]
  if id ~= nil then return id end
  if self.unknown_token then return self.token_to_idx[self.unknown_token] end
  error("Vocab: token '" .. tostring(t) .. "' is not in the vocabulary (and it has no unknown token)",
    level + 1)
end

-- vocab:to_indices(tokens): one token -> its id; a list -> a list of ids
function Vocab:to_indices(tokens)
  if type(tokens) == "string" then return lookup(self, tokens, 2) end
  local r = {}
  for i = 1, #tokens do r[i] = lookup(self, tokens[i], 2) end
  return r
end

-- vocab(tokens) is vocab:to_indices(tokens) (GluonNLP's __call__ / __getitem__)
function Vocab.__call(self, tokens)
  if type(tokens) == "string" then return lookup(self, tokens, 2) end
  local r = {}
  for i = 1, #tokens do r[i] = lookup(self, tokens[i], 2) end
  return r
end

-- vocab:to_tokens(ids): one id -> its token; a list -> a list of tokens
function Vocab:to_tokens(ids)
  local itt = self.idx_to_token
  local function one(id)
    local t = type(id) == "number" and itt[id + 1] or nil
    if t == nil then
      error("Vocab:to_tokens: id " .. tostring(id) .. " is out of range 0.." .. (#itt - 1), 3)
    end
    return t
  end
  if type(ids) == "number" then return one(ids) end
  local r = {}
  for i = 1, #ids do r[i] = one(ids[i]) end
  return r
end

-- vocab:set_embedding(emb, ...): attach vectors for this vocabulary's tokens from one
-- or more nlp.embedding.TokenEmbedding (concatenated); vocab.embedding is the result.
function Vocab:set_embedding(...)
  local embs = { ... }
  if #embs == 0 then error("Vocab:set_embedding: give at least one TokenEmbedding", 2) end
  local TE = require("mx.gluonnlp.embedding").TokenEmbedding
  self.embedding = TE._for_vocab(self, embs, 2)
  return self.embedding
end

local function identifiers(self)
  local ids = {}
  for k, v in pairs(self) do
    if type(k) == "string" and k:match("_token$") and k ~= "unknown_token" and type(v) == "string" then
      ids[k] = v
    end
  end
  return ids
end

-- vocab:to_json() -> GluonNLP 0.10's JSON (idx_to_token, token_to_idx, reserved_tokens,
-- unknown_token, identifiers_to_tokens)
function Vocab:to_json()
  local null = json.null
  return json.encode({
    idx_to_token = self.idx_to_token,
    token_to_idx = self.token_to_idx,
    reserved_tokens = self.reserved_tokens or null,
    unknown_token = self.unknown_token or null,
    identifiers_to_tokens = identifiers(self),
  }, 2)
end

-- Vocab.from_json(str): the inverse of to_json (also reads GluonNLP's own files)
function Vocab.from_json(s)
  local d = json.decode(s, "Vocab.from_json", 2)
  if type(d) ~= "table" or type(d.idx_to_token) ~= "table" then
    error("Vocab.from_json: no idx_to_token list", 2)
  end
  local v = setmetatable({}, Vocab)
  local itt, tti = {}, {}
  for i, t in ipairs(d.idx_to_token) do itt[i] = t tti[t] = i - 1 end
  v.idx_to_token, v.token_to_idx = itt, tti
  v.unknown_token = d.unknown_token ~= json.null and d.unknown_token or nil
  v.reserved_tokens = d.reserved_tokens ~= json.null and d.reserved_tokens or nil
  v.padding_token, v.bos_token, v.eos_token = nil, nil, nil
  local ids = d.identifiers_to_tokens
  if ids == nil then -- GluonNLP < 0.8 stored the three specials directly
    ids = { padding_token = d.padding_token, bos_token = d.bos_token, eos_token = d.eos_token }
  end
  for k, t in pairs(ids) do if t ~= json.null then v[k] = t end end
  return v
end

-- vocab:save(path) / Vocab.load(path): to_json written atomically / read back
function Vocab:save(path)
  file.write_atomic("Vocab:save", path, self:to_json(), 2)
end

function Vocab.load(path)
  local f, err = io.open(path, "rb")
  if not f then error("Vocab.load: cannot open " .. tostring(path) .. ": " .. tostring(err), 2) end
  local s = f:read("*a")
  f:close()
  return Vocab.from_json(s)
end

function Vocab:__tostring()
  return string.format("Vocab(size=%d, unk=%s, reserved=%s)", #self.idx_to_token,
    tostring(self.unknown_token), self.reserved_tokens and table.concat(self.reserved_tokens, ",") or "none")
end

return M
