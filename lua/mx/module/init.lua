-- mx.mod — MXNet 1.x's module API (python/mxnet/module): Module, BucketingModule and
-- BaseModule (fit / score / predict); docs/module.md.
local M = {
  BaseModule = require("mx.module.base_module").BaseModule,
  Module = require("mx.module.module").Module,
}
return setmetatable(M, { __index = function(t, k)
  if k == "BucketingModule" then
    local v = require("mx.module.bucketing_module").BucketingModule
    rawset(t, k, v)
    return v
  end
end })
