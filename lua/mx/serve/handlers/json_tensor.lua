-- The json_tensor handler: the base handler as it is (mx.serve's header describes the
-- JSON forms and KServe v2 tensors it takes and what it answers).
local serve = require("mx.serve")
return serve.Handler:extend("JsonTensorHandler")
