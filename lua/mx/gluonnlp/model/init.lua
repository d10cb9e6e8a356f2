-- mx.gluonnlp.model — GluonNLP 0.10's model namespace: BERT (BERTModel, BERTClassifier,
-- Hugging Face checkpoints), GPT-2 (GPT2Model with a key/value cache), the sequence
-- samplers (BeamSearchSampler, SequenceSampler) and the transformer encoder-decoder.
-- get_model(name, opts) builds a named configuration (no download: pretrained files
-- are loaded from disk with the from_hf loaders).
local M = {}

local LAZY = {
  BERTModel = "bert", BERTEncoder = "bert", BERTEncoderCell = "bert", BERTClassifier = "bert",
  GPT2Model = "gpt2",
  BeamSearchSampler = "sequence_sampler", SequenceSampler = "sequence_sampler",
  BeamSearchScorer = "sequence_sampler", NMTModel = "transformer", BeamSearchTranslator = "transformer",
}
local SUB = { bert = true, gpt2 = true, sequence_sampler = true, transformer = true, train = true }

function M.get_model(name, opts)
  if type(name) ~= "string" then error("get_model: name must be a string", 2) end
  if name:match("^bert_") then return require("mx.gluonnlp.model.bert").get_bert(name, opts) end
  if name:match("^gpt2_") then return require("mx.gluonnlp.model.gpt2").get_gpt2(name, opts) end
  error("get_model: unknown model '" .. name .. "' (bert_12_768_12, bert_24_1024_16, bert_6_384_12, "
    .. "gpt2_117m, gpt2_345m)", 2)
end

return setmetatable(M, {
  __index = function(t, k)
    local v
    if SUB[k] then v = require("mx.gluonnlp.model." .. k)
    elseif LAZY[k] then v = require("mx.gluonnlp.model." .. LAZY[k])[k]
    else return nil end
    rawset(t, k, v)
    return v
  end,
})
