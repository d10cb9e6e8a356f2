-- mx.gluonnlp.embedding — GluonNLP 0.10's TokenEmbedding: pretrained word vectors read
-- from GloVe / fastText / word2vec text files and word2vec binary files (nothing is
-- downloaded), looked up by token, attached to a Vocab; evaluation in
-- mx.gluonnlp.embedding.evaluation.
--
-- idx_to_vec is a float32 NDArray (N, D); the vector of id i (0-based) is row i + 1.
-- Unless unknown_token is false, id 0 is the unknown token ('<unk>', a zero vector
-- unless the file has it), which unknown lookups return.
local ffi = require("ffi")
local nd = require("mx.nd")
local U = require("mx.gluonnlp._util")

pcall(ffi.cdef, "float strtof(const char *nptr, char **endptr);")

local M = {}

-- the rows of w for a Lua list of 0-based ids (the embedding op's lookup)
local function rows_of(w, ids)
  return nd.embedding(nd.array(ids, { dtype = "int32" }), w)
end

local TokenEmbedding = U.class("TokenEmbedding")
M.TokenEmbedding = TokenEmbedding

local OPTS = { unknown_token = true, init_unknown_vec = true, allow_extend = true,
  idx_to_token = true, idx_to_vec = true, encoding = true, elem_delim = true,
  lower = true }

-- TokenEmbedding{idx_to_token=, idx_to_vec=, unknown_token='<unk>', allow_extend=false}:
-- from a token list and an (N, D) tensor (or nothing: an empty, extendable embedding).
function TokenEmbedding:__init(o)
  o = U.check_opts("TokenEmbedding", o, OPTS, 3)
  self.unknown_token = o.unknown_token == nil and "<unk>" or (o.unknown_token or nil)
  self.allow_extend = o.allow_extend or false
  self.idx_to_token, self.token_to_idx = {}, {}
  if o.idx_to_token then
    if not o.idx_to_vec then error("TokenEmbedding: idx_to_token needs idx_to_vec", 3) end
    local sh = o.idx_to_vec:shape()
    if #sh ~= 2 or sh[1] ~= #o.idx_to_token then
      error(string.format("TokenEmbedding: idx_to_vec must be (%d, D), got (%s)", #o.idx_to_token,
        table.concat(sh, ", ")), 3)
    end
    for i, t in ipairs(o.idx_to_token) do
      self.idx_to_token[i] = t
      self.token_to_idx[t] = i - 1
    end
    self.idx_to_vec = o.idx_to_vec:astype("float32")
  end
end

function TokenEmbedding:size() return #self.idx_to_token end
TokenEmbedding.__len = TokenEmbedding.size
function TokenEmbedding:dim() return self.idx_to_vec and self.idx_to_vec:shape()[2] or 0 end
function TokenEmbedding:contains(t) return self.token_to_idx[t] ~= nil end

-- build from parallel tables of tokens and a flat float buffer; the unknown token
-- becomes id 0 (its file vector kept if present)
local function build(tokens, vecs, n, dim, o)
  local unk = o.unknown_token == nil and "<unk>" or (o.unknown_token or nil)
  local order, seen = {}, {}
  local unk_row
  for i = 1, n do
    local t = tokens[i]
    if t == unk then unk_row = i
    elseif not seen[t] then seen[t] = true order[#order + 1] = i end
  end
  local total = #order + (unk and 1 or 0)
  local out = nd.zeros({ total, dim })
  local p = out:data_ptr()
  local itt = {}
  local row = 0
  if unk then
    itt[1] = unk
    if unk_row then ffi.copy(p, vecs + (unk_row - 1) * dim, dim * 4)
    elseif o.init_unknown_vec then
      local v = o.init_unknown_vec({ dim })
      local vp = v:astype("float32"):data_ptr()
      ffi.copy(p, vp, dim * 4)
    end
    row = 1
  end
  for _, i in ipairs(order) do
    ffi.copy(p + row * dim, vecs + (i - 1) * dim, dim * 4)
    row = row + 1
    itt[row] = tokens[i]
  end
  local e = setmetatable({}, TokenEmbedding)
  e.unknown_token = unk
  e.allow_extend = o.allow_extend or false
  e.idx_to_token = itt
  e.token_to_idx = {}
  for i, t in ipairs(itt) do e.token_to_idx[t] = i - 1 end
  e.idx_to_vec = out
  if #order < n - (unk_row and 1 or 0) then
    e.duplicates = n - (unk_row and 1 or 0) - #order -- later repeats skipped, as GluonNLP warns
  end
  return e
end

local function read_all(path, who, level)
  local f, err = io.open(path, "rb")
  if not f then error(who .. ": cannot open " .. tostring(path) .. ": " .. tostring(err), level + 1) end
  local s = f:read("*a")
  f:close()
  return s
end

-- TokenEmbedding.from_file(path, opts): a text file of "token v1 v2 ... vD" lines
-- (GloVe); a first line "N D" (word2vec / fastText .vec) is recognised and skipped.
-- opts: elem_delim (' '), unknown_token, init_unknown_vec (fn(shape) -> tensor).
-- Every line must have the same D; a bad line is an error naming its number.
function TokenEmbedding.from_file(path, o)
  o = U.check_opts("TokenEmbedding.from_file", o, OPTS, 2)
  local who = "TokenEmbedding.from_file"
  local s = read_all(path, who, 2)
  local delim = o.elem_delim or " "
  if #delim ~= 1 then error(who .. ": elem_delim must be one character", 2) end
  local buf = ffi.cast("const char*", s)
  local len = #s
  local endp = ffi.new("char*[1]")
  local tokens, n, dim = {}, 0, nil
  local cap = 1024
  local vecs
  local pos, lineno = 0, 0
  local d = delim:byte()
  while pos < len do
    lineno = lineno + 1
    local eol = s:find("\n", pos + 1, true) or (len + 1)
    local line_end = eol - 1 -- 1-based index of the last byte of the line
    if line_end > pos and s:byte(line_end) == 13 then line_end = line_end - 1 end
    local te = s:find(delim, pos + 1, true)
    if line_end <= pos then -- empty line
      pos = eol
    elseif not te or te > line_end then
      error(string.format("%s: %s line %d has a token but no vector", who, path, lineno), 2)
    else
      local tok = s:sub(pos + 1, te - 1)
      -- parse floats from te to line_end
      local vals = {}
      local q = buf + te
      local stop = buf + line_end
      while q < stop do
        while q < stop and (q[0] == d or q[0] == 32) do q = q + 1 end
        if q >= stop then break end
        local v = ffi.C.strtof(q, endp)
        if endp[0] == q then
          error(string.format("%s: %s line %d: '%s' is not a number", who, path, lineno,
            s:sub(q - buf + 1, math.min(q - buf + 12, line_end))), 2)
        end
        vals[#vals + 1] = v
        q = endp[0]
      end
      if lineno == 1 and #vals == 1 and tok:match("^%d+$") then
        -- the "N D" header of word2vec/fastText text files
        cap = math.max(tonumber(tok), 1)
      else
        if not dim then
          dim = #vals
          vecs = ffi.new("float[?]", cap * dim)
        elseif #vals ~= dim then
          error(string.format("%s: %s line %d has %d numbers where line 1 of the vectors has %d",
            who, path, lineno, #vals, dim), 2)
        end
        if n + 1 > cap then
          local nc = cap * 2
          local nv = ffi.new("float[?]", nc * dim)
          ffi.copy(nv, vecs, n * dim * 4)
          vecs, cap = nv, nc
        end
        for k = 1, dim do vecs[n * dim + k - 1] = vals[k] end
        n = n + 1
        tokens[n] = tok
      end
      pos = eol
    end
  end
  if n == 0 then error(who .. ": " .. path .. " holds no vectors", 2) end
  return build(tokens, vecs, n, dim, o)
end

-- TokenEmbedding.from_w2v_binary(path, opts): word2vec's binary format ("N D\n", then
-- per word: the word, a space, D little-endian float32, an optional newline)
function TokenEmbedding.from_w2v_binary(path, o)
  o = U.check_opts("TokenEmbedding.from_w2v_binary", o, OPTS, 2)
  local who = "TokenEmbedding.from_w2v_binary"
  local s = read_all(path, who, 2)
  local hn, hd, hend = s:match("^%s*(%d+)%s+(%d+)[^\n]*\n()")
  if not hn then error(who .. ": " .. path .. " has no 'N D' header line", 2) end
  local n, dim = tonumber(hn), tonumber(hd)
  if dim < 1 or n < 1 then error(who .. ": bad header " .. hn .. " " .. hd, 2) end
  local need = n * dim * 4
  if need > #s then
    error(string.format("%s: %s: header says %d x %d floats but the file has %d bytes", who, path,
      n, dim, #s), 2)
  end
  local vecs = ffi.new("float[?]", n * dim)
  local buf = ffi.cast("const char*", s)
  local pos = hend - 1 -- 0-based
  local tokens = {}
  for i = 1, n do
    while pos < #s and (s:byte(pos + 1) == 10 or s:byte(pos + 1) == 32) do pos = pos + 1 end
    local sp = s:find(" ", pos + 1, true)
    if not sp then error(string.format("%s: %s: word %d of %d is cut short", who, path, i, n), 2) end
    tokens[i] = s:sub(pos + 1, sp - 1)
    pos = sp
    if pos + dim * 4 > #s then
      error(string.format("%s: %s: vector %d of %d is cut short", who, path, i, n), 2)
    end
    ffi.copy(vecs + (i - 1) * dim, buf + pos, dim * 4)
    pos = pos + dim * 4
  end
  return build(tokens, vecs, n, dim, o)
end

local function id_of(self, t, lower_backup)
  local id = self.token_to_idx[t]
  if id == nil and lower_backup then id = self.token_to_idx[t:lower()] end
  return id
end

-- emb:get_vecs_by_tokens(tokens, lower_case_backup=false): a (D,) vector for one token,
-- a (#tokens, D) tensor for a list; unknown tokens get the unknown vector (an error
-- when there is no unknown token)
function TokenEmbedding:get_vecs_by_tokens(tokens, lower_backup)
  local one = type(tokens) == "string"
  local list = one and { tokens } or tokens
  local ids = {}
  for i, t in ipairs(list) do
    local id = id_of(self, t, lower_backup)
    if id == nil then
      if not self.unknown_token then
        error("TokenEmbedding: '" .. tostring(t)
          .. "' is not in the embedding (and it has no unknown token)", 2)
      end
      id = 0
    end
    ids[i] = id
  end
  local rows = rows_of(self.idx_to_vec, ids)
  if one then return rows[1] end
  return rows
end

-- emb:set_vecs(tokens, vecs): overwrite (or, with allow_extend, add) tokens' vectors;
-- vecs (#tokens, D) or (D,) for one token
function TokenEmbedding:set_vecs(tokens, vecs)
  local list = type(tokens) == "string" and { tokens } or tokens
  if #vecs:shape() == 1 then vecs = vecs:reshape({ 1, vecs:shape()[1] }) end
  local sh = vecs:shape()
  if sh[1] ~= #list then error("TokenEmbedding:set_vecs: " .. #list .. " tokens but " .. sh[1]
    .. " vectors", 2) end
  if self.idx_to_vec and sh[2] ~= self:dim() then
    error("TokenEmbedding:set_vecs: vectors have " .. sh[2] .. " dims, the embedding " .. self:dim(), 2)
  end
  local new = {}
  for _, t in ipairs(list) do
    if self.token_to_idx[t] == nil then
      if not self.allow_extend then
        error("TokenEmbedding:set_vecs: '" .. t .. "' is not in the embedding (allow_extend is false)", 2)
      end
      new[#new + 1] = t
    end
  end
  if #new > 0 or not self.idx_to_vec then
    local old = self.idx_to_vec
    local n0 = old and old:shape()[1] or 0
    if n0 == 0 and self.unknown_token and self.token_to_idx[self.unknown_token] == nil then
      self.idx_to_token[1] = self.unknown_token
      self.token_to_idx[self.unknown_token] = 0
      n0 = 1
      old = nd.zeros({ 1, sh[2] })
    end
    local grown = nd.zeros({ n0 + #new, sh[2] })
    if n0 > 0 then grown[{ { 1, n0 } }] = old end
    for k, t in ipairs(new) do
      self.idx_to_token[n0 + k] = t
      self.token_to_idx[t] = n0 + k - 1
    end
    self.idx_to_vec = grown
  end
  local v32 = vecs:astype("float32")
  for i, t in ipairs(list) do self.idx_to_vec[self.token_to_idx[t] + 1] = v32[i] end
end

-- the (len(vocab), D) matrix for a Vocab from embeddings (concatenated along D); a
-- token missing from an embedding gets that embedding's unknown vector (zeros without)
function TokenEmbedding._for_vocab(vocab, embs, level)
  local parts = {}
  for k, e in ipairs(embs) do
    if getmetatable(e) ~= TokenEmbedding then
      error("Vocab:set_embedding: argument " .. k .. " is not a TokenEmbedding", level + 1)
    end
    local ids = {}
    local zero_rows = {}
    for i, t in ipairs(vocab.idx_to_token) do
      local id = e.token_to_idx[t]
      if id == nil then
        if e.unknown_token then id = 0 else id = 0 zero_rows[#zero_rows + 1] = i end
      end
      ids[i] = id
    end
    local m = rows_of(e.idx_to_vec, ids)
    for _, r in ipairs(zero_rows) do m[r] = 0 end
    parts[k] = m
  end
  local mat = parts[1]
  if #parts > 1 then
    parts[#parts + 1] = { dim = 2 }
    mat = nd.concat(unpack(parts))
  end
  return TokenEmbedding({ idx_to_token = vocab.idx_to_token, idx_to_vec = mat,
    unknown_token = vocab.unknown_token or false })
end

-- emb:save_text(path): GloVe-style text (token and D numbers a line), written atomically
function TokenEmbedding:save_text(path)
  local file = require("mx.core.file")
  local lines = {}
  local p = self.idx_to_vec:data_ptr()
  local dim = self:dim()
  for i, t in ipairs(self.idx_to_token) do
    local row = { t }
    for k = 0, dim - 1 do row[k + 2] = string.format("%.9g", p[(i - 1) * dim + k]) end
    lines[i] = table.concat(row, " ")
  end
  file.write_atomic("TokenEmbedding:save_text", path, table.concat(lines, "\n") .. "\n", 2)
end

function TokenEmbedding:__tostring()
  return string.format("TokenEmbedding(%d tokens, dim %d)", #self.idx_to_token, self:dim())
end

M.evaluation = setmetatable({}, { __index = function(t, k)
  local ev = require("mx.gluonnlp.embedding.evaluation")
  setmetatable(t, { __index = ev })
  return ev[k]
end })

return M
