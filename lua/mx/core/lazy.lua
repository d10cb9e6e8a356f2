-- mx.core.lazy — the lazily loaded namespaces of mx, mx.gluon and mx.gluon.data.
--   local lazy = require("mx.core.lazy")
--   return lazy(M, { vision = "mx.gluon.data.vision", Trainer = { "mx.gluon.trainer", "Trainer" } })
-- gives M (and returns it) a metatable whose __index maps a listed name to the module
-- it names (or, for { module, field }, that field of the module), required on first
-- access and cached in M with rawset; any other missing name is nil.
return function(t, names)
  return setmetatable(t, {
    __index = function(tt, k)
      local what = names[k]
      if what == nil then return nil end
      local v
      if type(what) == "table" then v = require(what[1])[what[2]] else v = require(what) end
      rawset(tt, k, v)
      return v
    end,
  })
end
