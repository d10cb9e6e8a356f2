-- mx.gluonnlp.data — GluonNLP 0.10's data namespace: tokenizers, batchify, samplers,
-- streams and helpers. Submodules load on first use.
local M = {}

local LAZY = {
  BERTTokenizer = "tokenizers", BERTBasicTokenizer = "tokenizers",
  GPT2BPETokenizer = "tokenizers", GPT2BPEDetokenizer = "tokenizers",
  FixedBucketSampler = "sampler", SortedBucketSampler = "sampler",
  ConstWidthBucket = "sampler", LinearWidthBucket = "sampler", ExpWidthBucket = "sampler",
  DataStream = "stream", SimpleDataStream = "stream", SimpleDatasetStream = "stream",
  count_tokens = "utils",
}

return setmetatable(M, {
  __index = function(t, k)
    if k == "utils" or k == "batchify" then
      local u = require("mx.gluonnlp.data." .. k)
      rawset(t, k, u)
      return u
    end
    local mod = LAZY[k]
    if not mod then return nil end
    local v = require("mx.gluonnlp.data." .. mod)[k]
    rawset(t, k, v)
    return v
  end,
})
