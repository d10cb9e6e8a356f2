-- mx.gluon.rnn — recurrent cells and the fused recurrent layers (MXNet 1.9's gluon.rnn).
local rnn = {}
for _, mod in ipairs { "rnn_cell", "rnn_layer", "contrib_cells", "conv_cells" } do
  for k, v in pairs(require("mx.gluon.rnn." .. mod)) do
    if k:sub(1, 1) ~= "_" then
      if rnn[k] then error("mx.gluon.rnn: " .. k .. " exported twice (" .. mod .. ")", 0) end
      rnn[k] = v
    end
  end
end
return rnn
