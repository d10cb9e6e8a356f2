-- spec/helpers/err_at.lua — assert that a call fails with an error blamed on a given line
-- of the calling spec file (mx raises errors at the user's line).
--
--   local err_at = require("helpers.err_at")("elemwise_spec.lua")
--   local line = debug.getinfo(1, "l").currentline + 1
--   local msg = err_at(function() local r = mx.nd.add(a, b) return r end, line)
--
-- (The wrapped call must not be a tail call: that would drop the frame the error names.)
local assert = require("luassert")

return function(file)
  return function(f, line)
    local ok, msg = pcall(f)
    assert.is_false(ok)
    assert.is_truthy(msg:find(file .. ":" .. line .. ":", 1, true),
      "error not blamed on line " .. line .. ": " .. msg)
    return msg
  end
end
