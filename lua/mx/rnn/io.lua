-- mx.rnn.BucketSentenceIter: MXNet 1.x's bucketing text iterator (python/mxnet/rnn/io.py).
--
--   BucketSentenceIter(sentences, batch_size, buckets, invalid_label=-1, data_name="data",
--                      label_name="softmax_label", dtype="float32", layout="NT")
-- sentences: lists of token ids (mx.rnn.encode_sentences). Each goes to the shortest
-- bucket that holds it, padded with invalid_label (longer ones are dropped, with a
-- warning); buckets default to every length with at least batch_size sentences. A batch
-- comes from one bucket: data (batch_size, bucket) ("TN": transposed), label the data
-- shifted one step left (the next token; invalid_label last), bucket_key the bucket
-- length, provide_data / provide_label its shapes; default_bucket_key the largest bucket.
-- reset() shuffles the batches and each bucket's sentences (mx.random: mx.random.seed
-- repeats it); only whole batches are given.
local nd = require("mx.nd")
local io_ = require("mx.io")

local type, error, tostring, ipairs, pairs = type, error, tostring, ipairs, pairs

local M = {}

local It = io_._class("BucketSentenceIter", io_.DataIter)
M.BucketSentenceIter = It
local SIG = io_._sig(It, { { "sentences", list = true }, "batch_size", { "buckets", list = true },
  "invalid_label", "data_name", "label_name", "dtype", "layout" })

-- a permutation of 1..n drawn from mx.random
local function perm(n)
  if n == 0 then return {} end
  return nd.shuffle(nd.arange(1, n + 1, { dtype = "int64" })):tolist()
end

function It:__init(...)
  local o = SIG(3, ...)
  local sents, bs = o.sentences, o.batch_size
  if type(sents) ~= "table" then error("BucketSentenceIter: sentences must be a list of lists of ids", 3) end
  if type(bs) ~= "number" or bs < 1 or bs % 1 ~= 0 then
    error("BucketSentenceIter: batch_size must be a positive integer, got " .. tostring(bs), 3)
  end
  local invalid = o.invalid_label or -1
  local buckets = {}
  if o.buckets == nil or #o.buckets == 0 then
    local count = {}
    for _, s in ipairs(sents) do count[#s] = (count[#s] or 0) + 1 end
    for len, c in pairs(count) do if c >= bs then buckets[#buckets + 1] = len end end
  else
    for i, b in ipairs(o.buckets) do buckets[i] = b end
  end
  table.sort(buckets)
  local rows = {}
  for i = 1, #buckets do rows[i] = {} end
  local ndiscard = 0
  for _, s in ipairs(sents) do
    local k
    for i, b in ipairs(buckets) do if #s <= b then k = i break end end
    if k == nil then
      ndiscard = ndiscard + 1
    else
      local r = {}
      for t = 1, buckets[k] do r[t] = s[t] or invalid end
      local list = rows[k]
      list[#list + 1] = r
    end
  end
  if ndiscard > 0 then
    io.stderr:write(string.format("WARNING: discarded %d sentences longer than the largest bucket.\n",
      ndiscard))
  end
  self.buckets, self._data = {}, {}
  for i, b in ipairs(buckets) do
    if #rows[i] > 0 then
      self.buckets[#self.buckets + 1] = b
      self._data[#self._data + 1] = rows[i]
    end
  end
  if #self.buckets == 0 then error("BucketSentenceIter: no bucket holds a sentence", 3) end
  self.batch_size, self.invalid_label = bs, invalid
  self.data_name, self.label_name = o.data_name or "data", o.label_name or "softmax_label"
  self.dtype, self.layout = o.dtype or "float32", o.layout or "NT"
  if self.layout ~= "NT" and self.layout ~= "TN" then
    error("BucketSentenceIter: layout must be 'NT' (batch major) or 'TN' (time major), got "
      .. tostring(self.layout), 3)
  end
  self.major_axis = self.layout:find("N", 1, true)
  self.default_bucket_key = self.buckets[#self.buckets]
  local shape = self.major_axis == 1 and { bs, self.default_bucket_key } or { self.default_bucket_key, bs }
  self.provide_data = { io_.DataDesc(self.data_name, shape, self.dtype, self.layout) }
  self.provide_label = { io_.DataDesc(self.label_name, shape, self.dtype, self.layout) }
  self.idx = {}
  for i, b in ipairs(self._data) do
    for j = 0, #b - bs, bs do self.idx[#self.idx + 1] = { i, j } end
  end
  self:reset()
end

function It:reset()
  self.curr_idx = 0
  local p = perm(#self.idx)
  local idx = {}
  for k, v in ipairs(p) do idx[k] = self.idx[v] end
  self.idx = idx
  self._nddata, self._ndlabel = {}, {}
  for i, b in ipairs(self._data) do
    local len = self.buckets[i]
    local order = perm(#b)
    local d, l = {}, {}
    for _, r in ipairs(order) do
      local row = b[r]
      for t = 1, len do
        d[#d + 1] = row[t]
        l[#l + 1] = t < len and row[t + 1] or self.invalid_label
      end
    end
    self._nddata[i] = nd.array(d, { dtype = self.dtype }):reshape(#b, len)
    self._ndlabel[i] = nd.array(l, { dtype = self.dtype }):reshape(#b, len)
  end
end

function It:next()
  if self.curr_idx == #self.idx then return nil end
  self.curr_idx = self.curr_idx + 1
  local i, j = self.idx[self.curr_idx][1], self.idx[self.curr_idx][2]
  local data = self._nddata[i][{ { j + 1, j + self.batch_size } }]
  local label = self._ndlabel[i][{ { j + 1, j + self.batch_size } }]
  if self.major_axis == 2 then data, label = data:transpose(), label:transpose() end
  return io_.DataBatch({ data }, { label }, 0, nil, self.buckets[i],
    { io_.DataDesc(self.data_name, data:shape(), self.dtype, self.layout) },
    { io_.DataDesc(self.label_name, label:shape(), self.dtype, self.layout) })
end

return M
