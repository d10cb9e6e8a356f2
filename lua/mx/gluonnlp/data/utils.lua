-- mx.gluonnlp.data helpers: count_tokens, and the corpus readers shared by the examples
-- and specs (Debian's fortunes and word lists).
local M = {}

-- count_tokens(tokens, to_lower=false, counter=nil) -> counter (token -> count),
-- updated in place when given
function M.count_tokens(tokens, to_lower, counter)
  if type(tokens) ~= "table" then error("count_tokens: tokens must be a list, got " .. type(tokens), 2) end
  counter = counter or {}
  for i = 1, #tokens do
    local t = tokens[i]
    if type(t) ~= "string" then error("count_tokens: token " .. i .. " is a " .. type(t), 2) end
    if to_lower then t = t:lower() end
    counter[t] = (counter[t] or 0) + 1
  end
  return counter
end

-- split(s, sep) -> the pieces of s between occurrences of the plain string sep
function M.split(s, sep)
  local out, pos = {}, 1
  while true do
    local a, e = s:find(sep, pos, true)
    if not a then out[#out + 1] = s:sub(pos) return out end
    out[#out + 1] = s:sub(pos, a - 1)
    pos = e + 1
  end
end

M.FORTUNES = "/usr/share/games/fortunes"

-- fortunes() -> { {category=, text=}, ... }: every quote of Debian's fortunes package
-- (the files without an extension, quotes separated by "\n%\n"), files in sorted order;
-- nil and a message when the package is missing
function M.fortunes(dir)
  dir = dir or M.FORTUNES
  local p = io.popen('ls "' .. dir .. '" 2>/dev/null')
  local names = {}
  for n in p:lines() do if not n:find(".", 1, true) then names[#names + 1] = n end end
  p:close()
  if #names == 0 then return nil, "no fortunes under " .. dir .. " (Debian package fortunes)" end
  table.sort(names)
  local out = {}
  for _, n in ipairs(names) do
    local f = io.open(dir .. "/" .. n, "rb")
    if f then
      local s = f:read("*a")
      f:close()
      for _, q in ipairs(M.split(s, "\n%\n")) do
        q = q:gsub("\n?%%?\n?$", "")
        if q:match("%S") then out[#out + 1] = { category = n, text = q } end
      end
    end
  end
  return out
end

return M
