-- examples/_cli.lua — the command-line parsing the example scripts share.
--
--   local cli = dofile((arg[0]:match("^(.*[/\\])") or "./") .. "_cli.lua")
--   local opts = cli.parse(arg, { usage = USAGE, defaults = {...},
--     numeric = { epochs = true, ... }, string = { root = true, ... },
--     flags = { quiet = true }, choices = { optimizer = { "adam", "sgd" } } })
--
-- Accepts `--key value`, `--key=value` and `--flag`; dashes in keys become underscores.
-- A wrong argument prints the message and the usage to stderr and exits with status 2
-- (a script's user error, not a Lua traceback); --help prints the usage and exits 0.
local M = {}

local function die(msg, usage)
  io.stderr:write(msg, "\n", usage or "", "\n")
  os.exit(2)
end

M.die = die

function M.parse(argv, spec)
  local opts = {}
  for k, v in pairs(spec.defaults or {}) do opts[k] = v end
  local numeric, strings, flags = spec.numeric or {}, spec.string or {}, spec.flags or {}
  local i = 1
  while i <= #argv do
    local a = argv[i]
    local key, val = a:match("^%-%-([%w%-_]+)=(.*)$")
    key = key or a:match("^%-%-([%w%-_]+)$")
    if not key then die("unexpected argument " .. a, spec.usage) end
    key = key:gsub("%-", "_")
    if key == "help" then
      print(spec.usage)
      os.exit(0)
    end
    if flags[key] then
      opts[key] = true
    elseif numeric[key] or strings[key] then
      if val == nil then
        i = i + 1
        val = argv[i]
      end
      if val == nil then die("--" .. key .. " needs a value") end
      if numeric[key] then
        local n = tonumber(val)
        if not n then die("--" .. key .. " needs a number, got " .. val) end
        val = n
      end
      opts[key] = val
    else
      die("unknown option --" .. key, spec.usage)
    end
    i = i + 1
  end
  for key, allowed in pairs(spec.choices or {}) do
    local v = opts[key]
    if v ~= nil then
      local ok = false
      for _, c in ipairs(allowed) do ok = ok or c == v end
      if not ok then die("--" .. key:gsub("_", "-") .. " must be " .. table.concat(allowed, " or ")) end
    end
  end
  return opts
end

return M
