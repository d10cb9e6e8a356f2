-- mx.gluon.data.vision — vision datasets (MNIST, FashionMNIST) and transforms.
local datasets = require("mx.gluon.data.vision.datasets")

return {
  MNIST = datasets.MNIST,
  FashionMNIST = datasets.FashionMNIST,
  read_idx = datasets.read_idx,
  transforms = require("mx.gluon.data.vision.transforms"),
}
