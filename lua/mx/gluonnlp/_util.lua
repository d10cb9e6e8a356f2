-- mx.gluonnlp._util — the class constructor shape the gluonnlp classes share: calling
-- the class runs __init on a new instance. In __init, error level 3 is the user's line
-- (__init <- the class's __call <- caller).
local T = require("mx.core.class")

local M = {}

local function construct(cls, ...)
  local o = setmetatable({}, cls)
  o:__init(...)
  return o
end

function M.class(name, parent)
  local cls = parent and T.extend(parent, name) or T.base(name)
  return setmetatable(cls, { __index = parent, __call = construct })
end

M.check_opts = T.check_opts

return M
