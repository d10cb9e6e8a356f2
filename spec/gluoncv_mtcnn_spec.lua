-- mx.gluoncv.model_zoo.mtcnn: PNet, RNet and ONet with facenet-pytorch's real weights (PyPI
-- facenet-pytorch 2.6.0, tools/setup.sh --weights) give facenet-pytorch's outputs on inputs cut
-- from grace_hopper, and MTCNN.detect's faces on grace_hopper and scikit-image's astronaut
-- (spec/fixtures/mtcnn_torch.safetensors: tools/fixtures/make_mtcnn_fixture.py).
local mx = require("mx")
local nd = mx.nd
local mtcnn = require("mx.gluoncv.model_zoo.mtcnn")
local pypi = require("helpers.pypi")
local photos = require("helpers.photos")
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

  local function cascade()
    local pnet, why = loaded(mtcnn.PNet, "pnet.pt", F.pnet_in)
    if not pnet then return nil, why end
    return { pnet = pnet, rnet = loaded(mtcnn.RNet, "rnet.pt", F.rnet_in),
      onet = loaded(mtcnn.ONet, "onet.pt", F.onet_in) }
  end

  -- detect on the photo at path gives the fixture's <prefix>_boxes and _points: boxes and
  -- landmarks within 0.01 px, probabilities within 1e-5
  local function same_faces(nets, path, prefix)
    local boxes, points = mtcnn.detect(nets, mx.image.imread(path))
    local wb, wp = F[prefix .. "_boxes"]:totable(), F[prefix .. "_points"]:totable()
    assert.are.equal(#wb, #boxes, prefix .. ": faces")
    for i = 1, #wb do
      for k = 1, 4 do
        assert(math.abs(boxes[i][k] - wb[i][k]) < 0.01, string.format("%s: face %d box %d: %g, "
          .. "facenet-pytorch %g", prefix, i, k, boxes[i][k], wb[i][k]))
      end
      assert(math.abs(boxes[i][5] - wb[i][5]) < 1e-5, prefix .. ": probability")
      for q = 1, 5 do
        for c = 1, 2 do
          assert(math.abs(points[i][q][c] - wp[i][q][c]) < 0.01, string.format("%s: face %d "
            .. "landmark %d: %g, facenet-pytorch %g", prefix, i, q, points[i][q][c], wp[i][q][c]))
        end
      end
    end
    return boxes
  end

  it("#slow detect finds grace_hopper's face: facenet-pytorch's box and landmarks within 0.01 px",
    function()
    local nets, why = cascade()
    if not nets then pending(why) return end
    same_faces(nets, "spec/fixtures/images/grace_hopper.jpg", "detect")
    -- no face in darknet's dog photo (facenet-pytorch finds none either)
    local dog = "/usr/share/darknet/data/dog.jpg"
    local f = io.open(dog, "rb")
    if f then
      f:close()
      assert.are.equal(0, #mtcnn.detect(nets, mx.image.imread(dog)))
    end
  end)

  it("#slow detect finds scikit-image's astronaut: facenet-pytorch's box and landmarks within "
    .. "0.01 px", function()
    local nets, why = cascade()
    if not nets then pending(why) return end
    local path, absent = photos.skimage("astronaut")
    if not path then pending(absent) return end
    local boxes = same_faces(nets, path, "astronaut")
    assert.are.equal(1, #boxes) -- Eileen Collins' face, nothing else in the photo
    assert.is_true(boxes[1][5] > 0.999)
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

describe("examples/mtcnn_faces.lua #slow", function()
  it("prints grace_hopper's face and draws it", function()
    if not pypi("facenet_pytorch-2.6.0/facenet_pytorch/data/onet.pt") then
      pending("facenet-pytorch's weights are not in the PyPI cache") return
    end
    local lib = require("mx.core.lib")
    local build = lib.libpath:match("^(.*)/lib/mx/libmx%.so$")
    local png = os.tmpname() .. ".png"
    local p = assert(io.popen(string.format("MX_BUILD_DIR='%s' bin/mx examples/mtcnn_faces.lua "
      .. "--plot '%s' --crop 140,90,390,370 2>&1; echo EXIT=$?", build, png)))
    local out = p:read("*a")
    p:close()
    assert.is_truthy(out:find("1 face(s)", 1, true), out)
    assert.is_truthy(out:find("box (174.4, 119.6, 355.6, 340.5) probability 0.9998", 1, true), out)
    assert.is_truthy(out:find("EXIT=0", 1, true), out)
    local f = assert(io.open(png, "rb"))
    assert.are.equal("\137PNG", f:read(4))
    f:close()
    os.remove(png)
  end)
end)
