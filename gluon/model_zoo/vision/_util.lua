-- mx.gluon.model_zoo.vision._util — what every network constructor of the zoo shares: the
-- options MXNet's get_<net>(..., pretrained=, ctx=, root=, **kwargs) take, and loading
-- pretrained weights from the model store (mx.gluon.model_zoo.model_store).
local check_opts = require("mx.core.class").check_opts

local type, error, tostring = type, error, tostring

local M = {}

-- nn loads lazily: the layer modules may not be there when a zoo file is read
function M.nn() return require("mx.gluon.nn") end

local GET_OPTS = { classes = true, pretrained = true, ctx = true, root = true }
local NET_OPTS = { classes = true }

-- opts(who, opts, extra, level, net): the checked options table of a get_<net> call
-- (net: of a network class's constructor, which takes no pretrained/ctx/root); extra:
-- the network's own option names (thumbnail, multiplier...). classes must be a positive
-- integer and pretrained a boolean.
function M.opts(who, opts, extra, level, net)
  level = level + 1
  local o = check_opts(who, opts, net and NET_OPTS or GET_OPTS, level, extra)
  local classes = o.classes
  if classes ~= nil and (type(classes) ~= "number" or classes < 1 or classes % 1 ~= 0) then
    error(who .. ": classes must be a positive integer, got " .. tostring(classes), level)
  end
  if o.pretrained ~= nil and type(o.pretrained) ~= "boolean" then
    error(who .. ": pretrained must be a boolean, got " .. type(o.pretrained), level)
  end
  return o
end

-- finish(net, name, o, store, level): net, with the model store's weights for `name`
-- loaded when o.pretrained (store: "mxnet" or "gluoncv").
function M.finish(net, name, o, store, level)
  level = level + 1
  if o.pretrained then
    local path = require("mx.gluon.model_zoo.model_store").get_model_file(name,
      { root = o.root, store = store }, level)
    local ok, err = pcall(net.load_parameters, net, path, { ctx = o.ctx })
    if not ok then error(tostring(err):gsub("^[^:]*:%d+: ", ""), level) end
  end
  return net
end

-- ReLU6 (MXNet's mobilenet.RELU6, GluonCV's nn.ReLU6): clip(x, 0, 6).
local block = require("mx.gluon.block")
local nd = require("mx.nd")
local clip = nd.clip
local ReLU6 = block.HybridBlock:extend("ReLU6")
M.ReLU6 = ReLU6
function ReLU6:__init() block.HybridBlock.__init(self) end
local C06 = { a_min = 0, a_max = 6 }
function ReLU6.forward(_, x) return clip(x, C06) end

return M
