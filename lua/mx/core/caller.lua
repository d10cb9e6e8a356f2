-- mx.core.caller — which frame a user error blames: the first one outside luamx's own
-- Lua code (every module under mx/, mx.gluon's included, the op table's files, the
-- functions mx.nd generates with loadstring) and outside C functions (pcall, metamethod
-- entry). Error paths only: it walks the stack with debug.getinfo.
--
--   error(msg, caller.level())   -- in the function raising: blames the user's line
--   caller.where()               -- "file:line: " of that frame, "" when there is none
--
-- Do not tail-call the function that calls level(): a tail call removes the frame the
-- level counts.
local getinfo, sub, find = debug.getinfo, string.sub, string.find

local M = {}

-- "@<dir>/mx/": the source prefix of every module loaded from the tree this file is in
-- (the checkout's lua/mx, with gluon/ and core/ops/ reached through its symlinks, or the
-- installed rock's share/lua/5.1/mx)
local root = getinfo(1, "S").source:match("^(@.*[/\\])core[/\\][^/\\]*$")

local function ours(info)
  if info.what == "C" then return true end
  local src = info.source
  if root and sub(src, 1, #root) == root then return true end
  return find(src, "^=mx%.") ~= nil -- generated: "=mx.nd(add)", "=mx.nd.freeze(add)"
end
M.ours = ours

-- The level to pass to error() in the function calling level() (1 when every frame is
-- luamx's own).
function M.level()
  local level = 2
  while true do
    local info = getinfo(level + 1, "S")
    if not info then return 1 end
    if not ours(info) then return level end
    level = level + 1
  end
end

function M.where()
  local level = 2
  while true do
    local info = getinfo(level, "Sl")
    if not info then return "" end
    if not ours(info) and info.currentline and info.currentline > 0 then
      return info.short_src .. ":" .. info.currentline .. ": "
    end
    level = level + 1
  end
end

return M
