-- mx.gluonnlp — GluonNLP's core in Lua: `local nlp = require("mx.gluonnlp")`.
-- Names follow GluonNLP 0.10: nlp.Vocab, nlp.data (tokenizers, batchify, samplers,
-- streams), nlp.embedding, nlp.model. docs/gluonnlp.md is the guide.
local M = {}

local SUB = { data = true, embedding = true, model = true, vocab = true }

return setmetatable(M, {
  __index = function(t, k)
    local v
    if SUB[k] then
      v = require("mx.gluonnlp." .. k)
    elseif k == "Vocab" then
      v = require("mx.gluonnlp.vocab").Vocab
    else
      return nil
    end
    rawset(t, k, v)
    return v
  end,
})
