-- gluon/nn/conv_layers.lua — (issue 11) Gluon layers; gluon/nn/init.lua exports every key.
local M = {}
return M
