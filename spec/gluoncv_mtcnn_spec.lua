-- mx.gluoncv.model_zoo.mtcnn: PNet, RNet and ONet with facenet-pytorch's real weights (PyPI
-- facenet-pytorch 2.6.0, tools/setup.sh --weights) give facenet-pytorch's outputs on inputs cut
-- from grace_hopper (spec/fixtures/mtcnn_torch.safetensors: tools/fixtures/make_mtcnn_fixture.py).
local mx = require("mx")
local nd = mx.nd
local mtcnn = require("mx.gluoncv.model_zoo.mtcnn")
local pypi = require("helpers.pypi")
local H = require("helpers.la")

local DATA = "facenet_pytorch-2.6.0/facenet_pytorch/data/"

local function close(got, want, tol, what)
  assert.are.same(want:shape(), got:shape(), what)
  local d = H.maxdiff(got, want)
  assert(d <= tol, string.format("%s: max difference %g", what, d))
end

describe("gluoncv MTCNN networks", function()
  local F = nd.load("spec/fixtures/mtcnn_torch.safetensors")

  local function loaded(cls, file, x)
    local path, why = pypi(DATA .. file)
    if not path then return nil, why end
    local net = cls()
    net:initialize()
    net(x)
    return mtcnn.load_torch(net, path)
  end

  it("PNet gives facenet-pytorch's offsets and face probabilities on grace_hopper", function()
    local net, why = loaded(mtcnn.PNet, "pnet.pt", F.pnet_in)
    if not net then pending(why) return end
    local reg, prob = net(F.pnet_in)
    close(reg, F.pnet_reg, 1e-5, "pnet reg")
    close(prob, F.pnet_prob, 1e-5, "pnet prob")
  end)

  it("RNet and ONet give facenet-pytorch's outputs, landmarks included", function()
    local rnet, why = loaded(mtcnn.RNet, "rnet.pt", F.rnet_in)
    if not rnet then pending(why) return end
    local reg, prob = rnet(F.rnet_in)
    close(reg, F.rnet_reg, 1e-5, "rnet reg")
    close(prob, F.rnet_prob, 1e-5, "rnet prob")
    assert.is_true(prob:totable()[1][2] > 0.99) -- a face
    local onet = loaded(mtcnn.ONet, "onet.pt", F.onet_in)
    local oreg, marks, oprob = onet(F.onet_in)
    close(oreg, F.onet_reg, 1e-5, "onet reg")
    close(marks, F.onet_landmarks, 1e-5, "onet landmarks")
    close(oprob, F.onet_prob, 1e-5, "onet prob")
  end)

  it("names a checkpoint of the wrong network", function()
    local path, why = pypi(DATA .. "rnet.pt")
    if not path then pending(why) return end
    local net = mtcnn.PNet()
    net:initialize()
    net(F.pnet_in)
    assert.has_error(function() mtcnn.load_torch(net, path) end)
  end)
end)
