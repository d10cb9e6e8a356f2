-- mx.gluonnlp.data — GluonNLP 0.10's data namespace: tokenizers, batchify, samplers,
-- streams and helpers. Submodules load on first use.
local M = {}

local LAZY = {
  BERTTokenizer = "tokenizers", BERTBasicTokenizer = "tokenizers",
  GPT2BPETokenizer = "tokenizers", GPT2BPEDetokenizer = "tokenizers",
}

return setmetatable(M, {
  __index = function(t, k)
    local mod = LAZY[k]
    if not mod then return nil end
    local v = require("mx.gluonnlp.data." .. mod)[k]
    rawset(t, k, v)
    return v
  end,
})
