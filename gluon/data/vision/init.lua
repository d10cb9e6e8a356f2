-- mx.gluon.data.vision — vision datasets (MNIST, FashionMNIST, CIFAR10, CIFAR100,
-- ImageFolderDataset, ImageListDataset, ImageRecordDataset) and transforms.
local datasets = require("mx.gluon.data.vision.datasets")

return {
  MNIST = datasets.MNIST,
  FashionMNIST = datasets.FashionMNIST,
  CIFAR10 = datasets.CIFAR10,
  CIFAR100 = datasets.CIFAR100,
  ImageFolderDataset = datasets.ImageFolderDataset,
  ImageListDataset = datasets.ImageListDataset,
  ImageRecordDataset = datasets.ImageRecordDataset,
  read_idx = datasets.read_idx,
  datasets = datasets,
  transforms = require("mx.gluon.data.vision.transforms"),
}
