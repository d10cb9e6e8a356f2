-- examples/_text.lua — the fortunes corpus the text examples share (char_lstm.lua,
-- transformer_lm.lua): Debian's `fortunes` quotes (/usr/share/games/fortunes/*, one
-- quote per %-separated block), a character vocabulary, and batching.
--
--   local text = dofile(dir .. "_text.lua")
--   local corpus = text.load({ files = "fortunes,wisdom", max_chars = 300000, seed = 42 })
--   corpus.train, corpus.valid   -- arrays of character ids (1-based Lua arrays of 0-based ids)
--   corpus.vocab.chars[id + 1], corpus.vocab.ids[ch], corpus.vocab.size
--   corpus.encode(str), corpus.decode(ids)
--   local train, valid = text.word_sentences({ files = "fortunes", max_sentences = 5000 })
--   -- every line of a quote as a list of lower-case words (lstm_bucketing.lua)
local M = {}

M.DIR = "/usr/share/games/fortunes"
M.EOQ = "\30" -- the end of a quote (printed as a blank line)

local function list_files(dir)
  local p = io.popen('ls "' .. dir .. '" 2>/dev/null')
  local r = {}
  if p then
    for name in p:lines() do
      if not name:match("%.dat$") and not name:match("%.u8$") then r[#r + 1] = name end
    end
    p:close()
  end
  return r
end

-- the quotes of one file: blocks between lines holding only "%"
local function read_quotes(path, out)
  local f = io.open(path, "rb")
  if not f then return end
  local cur = {}
  for line in f:lines() do
    if line == "%" then
      if #cur > 0 then out[#out + 1] = table.concat(cur, "\n") end
      cur = {}
    else
      cur[#cur + 1] = line:gsub("\t", "    ")
    end
  end
  if #cur > 0 then out[#out + 1] = table.concat(cur, "\n") end
  f:close()
end

-- load{files=, max_chars=, valid_frac=0.05, seed=, min_count=5}: the quotes of the
-- named files ("all" or nil: every text file), shuffled with the seed, split into
-- validation (the first valid_frac of the quotes) and training (the rest, cut at
-- max_chars). Characters seen fewer than min_count times in training map to "?".
function M.load(o)
  local names = {}
  if o.files == nil or o.files == "all" then
    names = list_files(M.DIR)
  else
    for n in o.files:gmatch("[^,]+") do names[#names + 1] = n end
  end
  local quotes = {}
  for _, n in ipairs(names) do read_quotes(M.DIR .. "/" .. n, quotes) end
  if #quotes == 0 then
    io.stderr:write("no quotes found under ", M.DIR, " (Debian package fortunes)\n")
    os.exit(2)
  end
  -- a deterministic shuffle (a small LCG: the same split on every machine)
  local state = (o.seed or 42) % 2147483647
  local function rnd(k)
    state = (state * 48271) % 2147483647
    return state % k + 1
  end
  for i = #quotes, 2, -1 do
    local j = rnd(i)
    quotes[i], quotes[j] = quotes[j], quotes[i]
  end
  local nvalid = math.max(1, math.floor(#quotes * (o.valid_frac or 0.05)))
  local vparts, tparts, tlen = {}, {}, 0
  local vmax = o.max_valid_chars or 20000
  local vlen = 0
  for i = 1, #quotes do
    local q = quotes[i] .. M.EOQ
    if i <= nvalid then
      if vlen < vmax then
        vparts[#vparts + 1] = q
        vlen = vlen + #q
      end
    elseif not o.max_chars or tlen < o.max_chars then
      tparts[#tparts + 1] = q
      tlen = tlen + #q
    end
  end
  local train_s, valid_s = table.concat(tparts), table.concat(vparts)
  if o.max_chars then train_s = train_s:sub(1, o.max_chars) end
  local counts = {}
  for i = 1, #train_s do
    local c = train_s:sub(i, i)
    counts[c] = (counts[c] or 0) + 1
  end
  local chars = { "?" }
  local ids = { ["?"] = 0 }
  local sorted = {}
  for c, k in pairs(counts) do
    if k >= (o.min_count or 5) and c ~= "?" then sorted[#sorted + 1] = c end
  end
  table.sort(sorted)
  for _, c in ipairs(sorted) do
    ids[c] = #chars
    chars[#chars + 1] = c
  end
  local function encode(s)
    local r = {}
    for i = 1, #s do r[i] = ids[s:sub(i, i)] or 0 end
    return r
  end
  local function decode(idl)
    local r = {}
    for i = 1, #idl do
      local c = chars[idl[i] + 1]
      r[i] = c == M.EOQ and "\n\n" or c
    end
    return table.concat(r)
  end
  return { train = encode(train_s), valid = encode(valid_s), quotes = #quotes,
    files = #names, vocab = { chars = chars, ids = ids, size = #chars },
    encode = encode, decode = decode }
end

-- word_sentences{files=, max_sentences=, max_valid=, valid_frac=0.1, seed=42}: the
-- lines of the quotes as lists of lower-case words (letters, digits and "'"), in a
-- seeded shuffled order; the first valid_frac of them for validation (at most
-- max_valid), then up to max_sentences for training.
function M.word_sentences(o)
  local names = {}
  for n in (o.files or "fortunes"):gmatch("[^,]+") do names[#names + 1] = n end
  if o.files == "all" then names = list_files(M.DIR) end
  local quotes = {}
  for _, n in ipairs(names) do read_quotes(M.DIR .. "/" .. n, quotes) end
  local sents = {}
  for _, q in ipairs(quotes) do
    for line in q:gmatch("[^\n]+") do
      local words = {}
      for w in line:lower():gmatch("[%w']+") do words[#words + 1] = w end
      if #words > 0 then sents[#sents + 1] = words end
    end
  end
  if #sents == 0 then
    io.stderr:write("no quotes found under ", M.DIR, " (Debian package fortunes)\n")
    os.exit(2)
  end
  local state = (o.seed or 42) % 2147483647
  for i = #sents, 2, -1 do
    state = (state * 48271) % 2147483647
    local j = state % i + 1
    sents[i], sents[j] = sents[j], sents[i]
  end
  local nvalid = math.max(1, math.floor(#sents * (o.valid_frac or 0.1)))
  local valid, train = {}, {}
  for i = 1, #sents do
    if i <= nvalid then
      if not o.max_valid or #valid < o.max_valid then valid[#valid + 1] = sents[i] end
    elseif not o.max_sentences or #train < o.max_sentences then
      train[#train + 1] = sents[i]
    end
  end
  return train, valid
end

-- batchify(ids, n) -> an (L, n) Lua table of n parallel streams (time-major), L = #ids // n
function M.batchify(ids, n)
  local L = math.floor(#ids / n)
  local rows = {}
  for t = 1, L do
    local r = {}
    for j = 1, n do r[j] = ids[(j - 1) * L + t] end
    rows[t] = r
  end
  return rows, L
end

return M
