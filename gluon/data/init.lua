-- mx.gluon.data — datasets, samplers, batchify functions and the DataLoader
-- (MXNet's gluon.data). `vision` (MNIST, FashionMNIST, transforms) loads on first use.
local dataset = require("mx.gluon.data.dataset")
local sampler = require("mx.gluon.data.sampler")

local M = {
  Dataset = dataset.Dataset,
  SimpleDataset = dataset.SimpleDataset,
  ArrayDataset = dataset.ArrayDataset,
  LibSVMDataset = require("mx.gluon.data.libsvm").LibSVMDataset,
  recipe = dataset.recipe, -- how a worker thread rebuilds a dataset (docs/design/data.md)
  Sampler = sampler.Sampler,
  SequentialSampler = sampler.SequentialSampler,
  RandomSampler = sampler.RandomSampler,
  FilterSampler = sampler.FilterSampler,
  IntervalSampler = sampler.IntervalSampler,
  BatchSampler = sampler.BatchSampler,
  DataLoader = require("mx.gluon.data.dataloader"),
  batchify = require("mx.gluon.data.batchify"),
}

return require("mx.core.lazy")(M, { vision = "mx.gluon.data.vision" })
