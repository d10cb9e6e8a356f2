-- mx.gluonnlp.data tokenizers: BERT (basic + WordPiece) and GPT-2 (byte-level BPE).
-- The work is done in C (core/text, libmx_text); this file loads vocabularies, builds
-- the C tokenizers and converts results. Token ids are 0-based values (what the
-- vocabulary files and Embedding use); offsets are 1-based inclusive byte positions
-- (text:sub(s, e) is the token's source text).
local U = require("mx.gluonnlp._util")
local text = require("mx.gluonnlp._text")
local cache = require("mx.gluonnlp._cache")
local json = require("mx.gluonnlp._json")

local ffi, C = text.ffi, text.C
local run = text.run

local M = {}

local function read_all(path, who, level)
  local f, err = io.open(path, "rb")
  if not f then error(who .. ": cannot open " .. tostring(path) .. ": " .. tostring(err), level + 1) end
  local s = f:read("*a")
  f:close()
  return s
end

local function check_text(s, who, level)
  if type(s) ~= "string" then
    error(who .. ": text must be a string, got " .. type(s), level + 1)
  end
end

-- encode_split(s, specials, plain, offs, level): ids of s with the special tokens
-- (specials: text -> id) split out first, the rest through plain(piece, out, offs, base,
-- level) (base: the piece's byte position in s, 0-based). Earliest match first, the
-- longest of those at one position.
local function encode_split(s, specials, plain, offs, level)
  local out = {}
  if not specials or next(specials) == nil then
    plain(s, out, offs, 0, level + 1)
    return out
  end
  local pos = 1
  while true do
    local best, bend, bid
    for tok, id in pairs(specials) do
      local a, e = s:find(tok, pos, true)
      if a and (not best or a < best or (a == best and e > bend)) then best, bend, bid = a, e, id end
    end
    if not best then break end
    plain(s:sub(pos, best - 1), out, offs, pos - 1, level + 1)
    out[#out + 1] = bid
    if offs then offs[#out] = { best, bend } end
    pos = bend + 1
  end
  plain(s:sub(pos), out, offs, pos - 1, level + 1)
  return out
end

-- a plain-piece encoder over one C encode function and a tokenizer handle
local function plain_encoder(fn, handle)
  return function(s, out, offs, base, level)
    if #s == 0 then return end
    local ids, o, n = run(fn, handle, s, offs ~= nil, level + 1)
    local k = #out
    for i = 0, n - 1 do
      out[k + i + 1] = ids[i]
      if offs then offs[k + i + 1] = { base + tonumber(o[2 * i]) + 1, base + tonumber(o[2 * i + 1]) } end
    end
  end
end

---------------------------------------------------------------- BERT
local BERTTokenizer = U.class("BERTTokenizer")
M.BERTTokenizer = BERTTokenizer

local function wp_opts(o, level)
  o = o or {}
  local opts = ffi.new("mx_text_wordpiece_opts")
  opts.lower = (o.lower == nil or o.lower) and 1 or 0
  if o.strip_accents == nil then opts.strip_accents = -1
  else opts.strip_accents = o.strip_accents and 1 or 0 end
  opts.chinese_chars = (o.tokenize_chinese_chars == nil or o.tokenize_chinese_chars) and 1 or 0
  opts.max_chars = o.max_input_chars_per_word or 100
  if type(opts.max_chars) ~= "number" then error("BERTTokenizer: bad max_input_chars_per_word", level + 1) end
  return opts
end

local function new_wordpiece(vocab_text, o, level)
  o = o or {}
  local unk = o.unknown_token or "[UNK]"
  local out = ffi.new("mx_text_wordpiece*[1]")
  text.check(C.mx_text_wordpiece_new(vocab_text, #vocab_text, unk, o.prefix or "##",
    wp_opts(o, level + 1), out), level + 1)
  return ffi.gc(out[0], C.mx_text_wordpiece_free)
end

-- the ids -> token strings list of a vocab.txt's bytes (line k is id k)
local function lines_of(s)
  local t = {}
  for line in (s:sub(-1) == "\n" and s or s .. "\n"):gmatch("([^\n]*)\n") do t[#t + 1] = line end
  return t
end

-- BERTTokenizer(vocab, opts): vocab is a path to vocab.txt or an mx.gluonnlp.Vocab.
-- opts: lower (true), strip_accents (nil: as lower), tokenize_chinese_chars (true),
-- max_input_chars_per_word (100), unknown_token ("[UNK]"; a Vocab's own by default).
function BERTTokenizer:__init(vocab, o)
  o = o or {}
  local vtext
  if type(vocab) == "string" then
    vtext = read_all(vocab, "BERTTokenizer", 3)
    self.idx_to_token = lines_of(vtext)
  elseif type(vocab) == "table" and vocab.idx_to_token then
    self.vocab = vocab
    self.idx_to_token = vocab.idx_to_token
    vtext = table.concat(vocab.idx_to_token, "\n") .. "\n"
    if o.unknown_token == nil and vocab.unknown_token then
      o = setmetatable({ unknown_token = vocab.unknown_token }, { __index = o })
    end
  else
    error("BERTTokenizer: vocab must be a vocab.txt path or an mx.gluonnlp.Vocab, got "
      .. type(vocab), 3)
  end
  self.lower = o.lower == nil or o.lower
  self._w = new_wordpiece(vtext, o, 3)
  self._plain = plain_encoder(C.mx_text_wordpiece_encode, self._w)
  self.unknown_token = o.unknown_token or "[UNK]"
  -- special tokens written in the text are kept whole, as transformers does
  self._specials = {}
  local specials = o.special_tokens or { self.unknown_token, "[SEP]", "[PAD]", "[CLS]", "[MASK]" }
  for _, t in ipairs(specials) do
    local id = C.mx_text_wordpiece_id(self._w, t, #t)
    if id >= 0 then self._specials[t] = id end
  end
end

-- tok(text) -> the WordPiece token strings (GluonNLP 0.10's __call__)
function BERTTokenizer:__call(s)
  check_text(s, "BERTTokenizer", 2)
  local ids = encode_split(s, self._specials, self._plain, nil, 2)
  local out, itt = {}, self.idx_to_token
  for i = 1, #ids do out[i] = itt[ids[i] + 1] end
  return out
end

-- tok:encode(text) -> list of ids (0-based)
function BERTTokenizer:encode(s)
  check_text(s, "BERTTokenizer:encode", 2)
  return encode_split(s, self._specials, self._plain, nil, 2)
end

-- tok:encode_with_offsets(text) -> ids, offsets ({first_byte, last_byte} per token)
function BERTTokenizer:encode_with_offsets(s)
  check_text(s, "BERTTokenizer:encode_with_offsets", 2)
  local offs = {}
  local ids = encode_split(s, self._specials, self._plain, offs, 2)
  return ids, offs
end

-- tok:encode_raw(text) -> int32_t* ids, n: the C buffer itself (valid until the next
-- encode call on any tokenizer), special tokens not split out; for bulk counting
-- without building Lua tables.
function BERTTokenizer:encode_raw(s)
  check_text(s, "BERTTokenizer:encode_raw", 2)
  local ids, _, n = run(C.mx_text_wordpiece_encode, self._w, s, false, 2)
  return ids, n
end

function BERTTokenizer:convert_tokens_to_ids(tokens)
  local w = self._w
  local function one(t)
    local id = C.mx_text_wordpiece_id(w, t, #t)
    if id < 0 then id = C.mx_text_wordpiece_id(w, self.unknown_token, #self.unknown_token) end
    return id
  end
  if type(tokens) == "string" then return one(tokens) end
  local r = {}
  for i = 1, #tokens do r[i] = one(tokens[i]) end
  return r
end

function BERTTokenizer:convert_ids_to_tokens(ids)
  local itt = self.idx_to_token
  if type(ids) == "number" then return itt[ids + 1] end
  local r = {}
  for i = 1, #ids do
    local t = itt[ids[i] + 1]
    if t == nil then error("convert_ids_to_tokens: id " .. tostring(ids[i]) .. " is out of range 0.."
      .. (#itt - 1), 2) end
    r[i] = t
  end
  return r
end

function BERTTokenizer:vocab_size() return #self.idx_to_token end

-- BERTBasicTokenizer(opts): the basic tokenizer alone (no vocabulary): words after
-- cleaning, lowercasing, accent stripping and punctuation splitting.
local BERTBasicTokenizer = U.class("BERTBasicTokenizer")
M.BERTBasicTokenizer = BERTBasicTokenizer

function BERTBasicTokenizer:__init(o)
  o = o or {}
  self._w = new_wordpiece("[UNK]\n", o, 3)
end

local bbuf, bcap = nil, 0
local nb, nw = ffi.new("int64_t[1]"), ffi.new("int64_t[1]")
local function basic(self, s, want_spans, level)
  check_text(s, "BERTBasicTokenizer", level + 1)
  local need = 2 * #s + 16
  while true do
    if need > bcap then bcap = math.max(need, 2 * bcap) bbuf = ffi.new("char[?]", bcap) end
    local _, offs, ocap = text.buffers(need)
    text.check(C.mx_text_basic_tokenize(self._w, s, #s, bbuf, bcap, nb, offs, ocap, nw), level + 1)
    if tonumber(nb[0]) <= bcap and tonumber(nw[0]) <= ocap then
      local words, spans = {}, want_spans and {} or nil
      local str = ffi.string(bbuf, nb[0])
      local i = 1
      for wd in str:gmatch("([^%z]*)%z") do
        words[i] = wd
        if spans then spans[i] = { tonumber(offs[2 * i - 2]) + 1, tonumber(offs[2 * i - 1]) } end
        i = i + 1
      end
      return words, spans
    end
    need = math.max(tonumber(nb[0]), tonumber(nw[0])) + 16
  end
end

function BERTBasicTokenizer:__call(s) return (basic(self, s, false, 2)) end
function BERTBasicTokenizer:tokenize_with_offsets(s) return basic(self, s, true, 2) end

---------------------------------------------------------------- GPT-2
-- GPT-2's byte <-> printable-character table (the bytes_to_unicode of its encoder.py):
-- printable Latin-1 bytes map to themselves, the rest to U+0100 onwards.
local function utf8_char(cp)
  if cp < 0x80 then return string.char(cp) end
  if cp < 0x800 then return string.char(0xC0 + math.floor(cp / 64), 0x80 + cp % 64) end
  return string.char(0xE0 + math.floor(cp / 4096), 0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
end

local byte_to_uni, uni_to_byte = {}, {}
do
  local n = 0
  for b = 0, 255 do
    local printable = (b >= 33 and b <= 126) or (b >= 161 and b <= 172) or (b >= 174 and b <= 255)
    local cp = b
    if not printable then cp = 256 + n n = n + 1 end
    local u = utf8_char(cp)
    byte_to_uni[b] = u
    uni_to_byte[u] = string.char(b)
  end
end
M._byte_to_unicode = byte_to_uni

local function unicode_to_bytes(s, who, level)
  local out = {}
  for ch in s:gmatch("[%z\1-\127\194-\244][\128-\191]*") do
    local b = uni_to_byte[ch]
    if not b then error(who .. ": '" .. s .. "' is not a byte-level BPE token", level + 1) end
    out[#out + 1] = b
  end
  return table.concat(out)
end

local B64 = {}
do
  local a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
  for i = 1, 64 do B64[a:byte(i)] = i - 1 end
end

local function b64decode(s, level)
  local out, n = {}, 0
  local bits, nbits = 0, 0
  for i = 1, #s do
    local c = s:byte(i)
    if c ~= 61 then -- '='
      local v = B64[c]
      if not v then error("gpt2.tiktoken: bad base64 '" .. s .. "'", level + 1) end
      bits = bits * 64 + v
      nbits = nbits + 6
      if nbits >= 8 then
        nbits = nbits - 8
        local byte = math.floor(bits / 2 ^ nbits)
        bits = bits - byte * 2 ^ nbits
        n = n + 1
        out[n] = string.char(byte)
      end
    end
  end
  return table.concat(out)
end

local GPT2BPETokenizer = U.class("GPT2BPETokenizer")
M.GPT2BPETokenizer = GPT2BPETokenizer

local WHISPER = "openai_whisper-20250625"

-- GPT2BPETokenizer(opts): GPT-2's byte-level BPE. opts.tiktoken: a gpt2.tiktoken file
-- (default: openai-whisper's, from the PyPI cache); or opts.vocab + opts.merges:
-- encoder.json/vocab.json and vocab.bpe/merges.txt. opts.pattern: another pre-tokenizer
-- pattern (PCRE2). <|endoftext|> (50256) is a special token, split out of text only when
-- opts.allowed_special is true (tiktoken's allowed_special="all").
function GPT2BPETokenizer:__init(o)
  o = o or {}
  local out = ffi.new("mx_text_bpe*[1]")
  text.check(C.mx_text_bpe_new(o.pattern, out), 3)
  local b = ffi.gc(out[0], C.mx_text_bpe_free)
  self._b = b
  local id_to_bytes = {}
  if o.vocab or o.merges then
    if not (o.vocab and o.merges) then
      error("GPT2BPETokenizer: give both vocab (vocab.json) and merges (merges.txt)", 3)
    end
    local enc = json.read_file(o.vocab, 3)
    local rank = {}
    local b2u = byte_to_uni
    for i = 0, 255 do rank[b2u[i]] = -1 end
    local r = 0
    for line in io.lines(o.merges) do
      if not line:match("^#version") and line ~= "" then
        local x, y = line:match("^(%S+) (%S+)$")
        if not x then error("GPT2BPETokenizer: bad merges line '" .. line .. "'", 3) end
        local m = x .. y
        if rank[m] == nil then rank[m] = r end
        r = r + 1
      end
    end
    for tok, id in pairs(enc) do
      local bytes = unicode_to_bytes(tok, "GPT2BPETokenizer", 3)
      id_to_bytes[id] = bytes
      local rk = rank[tok]
      if rk ~= nil or #bytes == 1 then
        text.check(C.mx_text_bpe_add(b, bytes, #bytes, rk or -1, id), 3)
      else
        self._special = self._special or {}
        self._special[tok] = id
      end
    end
  else
    local path = o.tiktoken
    if not path then
      local msg
      path, msg = cache.path(WHISPER, "whisper/assets/gpt2.tiktoken")
      if not path then error("GPT2BPETokenizer: " .. msg, 3) end
    end
    local f, err = io.open(path, "rb")
    if not f then error("GPT2BPETokenizer: cannot open " .. path .. ": " .. tostring(err), 3) end
    for line in f:lines() do
      local t64, rk = line:match("^(%S+) (%d+)$")
      if t64 then
        local bytes = b64decode(t64, 3)
        rk = tonumber(rk)
        id_to_bytes[rk] = bytes
        text.check(C.mx_text_bpe_add(b, bytes, #bytes, rk, rk), 3)
      elseif line ~= "" then
        f:close()
        error("GPT2BPETokenizer: bad line in " .. path .. ": '" .. line:sub(1, 60) .. "'", 3)
      end
    end
    f:close()
    self._special = { ["<|endoftext|>"] = #id_to_bytes + 1 }
  end
  self._special = self._special or {}
  for tok, id in pairs(self._special) do id_to_bytes[id] = tok end
  self.id_to_bytes = id_to_bytes
  self.allowed_special = o.allowed_special
  self._plain = plain_encoder(C.mx_text_bpe_encode, b)
  local n = 0
  for _ in pairs(id_to_bytes) do n = n + 1 end
  self._size = n
  self.eos_id = self._special["<|endoftext|>"]
end

function GPT2BPETokenizer:vocab_size() return self._size end

local function encode(self, s, offs, level)
  check_text(s, "GPT2BPETokenizer", level + 1)
  return encode_split(s, self.allowed_special and self._special, self._plain, offs, level + 1)
end

function GPT2BPETokenizer:encode(s) return encode(self, s, nil, 2) end

function GPT2BPETokenizer:encode_with_offsets(s)
  local offs = {}
  local ids = encode(self, s, offs, 2)
  return ids, offs
end

function GPT2BPETokenizer:encode_raw(s)
  check_text(s, "GPT2BPETokenizer:encode_raw", 2)
  local ids, _, n = run(C.mx_text_bpe_encode, self._b, s, false, 2)
  return ids, n
end

-- tok(text) -> GluonNLP 0.10's output: the tokens in byte-to-unicode form ("Ġworld")
function GPT2BPETokenizer:__call(s)
  local ids = encode(self, s, nil, 2)
  local r = {}
  for i = 1, #ids do r[i] = self:id_to_token(ids[i]) end
  return r
end

function GPT2BPETokenizer:id_to_token(id)
  local bytes = self.id_to_bytes[id]
  if not bytes then error("GPT2BPETokenizer: id " .. tostring(id) .. " is not in the vocabulary", 2) end
  if self._special[bytes] then return bytes end
  return (bytes:gsub(".", function(c) return byte_to_uni[c:byte()] end))
end

-- tok:decode(ids) -> the text (bytes joined; invalid UTF-8 is kept as bytes)
function GPT2BPETokenizer:decode(ids)
  local parts, itb = {}, self.id_to_bytes
  for i = 1, #ids do
    local b = itb[ids[i]]
    if not b then
      error("GPT2BPETokenizer:decode: id " .. tostring(ids[i]) .. " is not in the vocabulary", 2)
    end
    parts[i] = b
  end
  return table.concat(parts)
end

-- GPT2BPEDetokenizer(): byte-to-unicode tokens back to text (GluonNLP 0.10)
local GPT2BPEDetokenizer = U.class("GPT2BPEDetokenizer")
M.GPT2BPEDetokenizer = GPT2BPEDetokenizer
function GPT2BPEDetokenizer.__init() end
function GPT2BPEDetokenizer.__call(_, tokens)
  local parts = {}
  for i = 1, #tokens do parts[i] = unicode_to_bytes(tokens[i], "GPT2BPEDetokenizer", 2) end
  return table.concat(parts)
end

return M
