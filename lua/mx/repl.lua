-- mx.repl — the interactive luamx shell that bin/mx starts.
--
-- Each line is evaluated in a session environment that has `mx`, `nd` (mx.nd),
-- `gluon`, `autograd` and `help` (mx.help) ready. The value of an expression is
-- printed (tensors pretty-printed, tables summarised); no `=` prefix is needed.
-- `local x = ...` at the top level keeps x for the next lines (the REPL drops the
-- `local`). Unfinished statements continue on the next line (prompt ">>").
-- Line editing comes from rlwrap (bin/mx uses it when present) or, failing that,
-- GNU readline loaded through the FFI; with neither, plain io.read. When stdin is
-- not a terminal (a pipe, a test) no banner or prompts are printed.
local ffi = require("ffi")

local M = {}

ffi.cdef [[
int mx_repl_isatty(int fd) __asm__("isatty");
void mx_repl_free(void *p) __asm__("free");
]]

local function isatty(fd) return ffi.C.mx_repl_isatty(fd) == 1 end

---------------------------------------------------------------- printing values
local function is_identifier(s) return type(s) == "string" and s:match("^[%a_][%w_]*$") end

local function short(v, depth, seen)
  local t = type(v)
  if t == "string" then return depth == 0 and v or string.format("%q", v) end
  if t ~= "table" then
    if t == "cdata" then
      local ok, nd = pcall(require, "mx.nd")
      if ok and nd.is_tensor(v) then
        if depth == 0 then return tostring(v) end
        return "<NDArray " .. table.concat(v:shape(), "x") .. " " .. v:dtype() .. ">"
      end
    end
    return tostring(v)
  end
  local mt = getmetatable(v)
  if mt and rawget(mt, "__tostring") then return tostring(v) end
  if seen[v] then return "<cycle>" end
  if depth >= 2 then return "{...}" end
  seen[v] = true
  local parts, n = {}, #v
  for i = 1, math.min(n, 20) do parts[#parts + 1] = short(v[i], depth + 1, seen) end
  if n > 20 then parts[#parts + 1] = "... (" .. n .. " items)" end
  local keys = {}
  for k in pairs(v) do
    if not (type(k) == "number" and k >= 1 and k <= n and k % 1 == 0) then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for i, k in ipairs(keys) do
    if i > 20 then
      parts[#parts + 1] = "... (" .. #keys .. " keys)"
      break
    end
    local key = is_identifier(k) and k or ("[" .. short(k, depth + 1, seen) .. "]")
    local val = v[k]
    local text = type(val) == "function" and "function" or short(val, depth + 1, seen)
    parts[#parts + 1] = key .. " = " .. text
  end
  seen[v] = nil
  return "{" .. table.concat(parts, ", ") .. "}"
end

-- The text the REPL prints for a value.
function M.repr(v) return short(v, 0, {}) end

---------------------------------------------------------------- evaluation
local function new_env()
  local mx = require("mx")
  local env = {
    mx = mx, nd = mx.nd,
    help = function(obj) return require("mx.help")(obj) end,
  }
  -- gluon and autograd load on first use (they may be absent in a partial build)
  return setmetatable(env, {
    __index = function(_, k)
      if k == "gluon" or k == "autograd" then return mx[k] end
      return _G[k]
    end,
  })
end
M.new_env = new_env

-- `local a, b = ...` / `local function f` at the top level -> session variables
local function unlocal(src)
  local s = src:gsub("^%s*local%s+function%s+", "function ", 1)
  if s ~= src then return s end
  local names, rest = src:match("^%s*local%s+([%a_][%w_%s,]*)=(.*)$")
  if names and not rest:match("^=") then return names .. "=" .. rest end
  local only = src:match("^%s*local%s+([%a_][%w_%s,]*)%s*$")
  if only then return only .. " = nil" end
  return src
end

local function pack(...) return { n = select("#", ...), ... } end

-- Compile a chunk: as an expression first, then as statements. Returns fn, or nil
-- and (incomplete: true when more input could complete it) the message.
local function compile(src, env)
  local body = src:gsub("^%s*=", "", 1)
  -- an expression is evaluated as the arguments of a pack call, not as `return
  -- expr`: a tail call would drop the line's frame, and errors raised with a level
  -- (mx's "blame the caller") would lose their position
  local fn = loadstring("local __pack = ... return __pack(" .. body .. "\n)", "=stdin")
  if fn then
    setfenv(fn, env)
    return fn, true
  end
  if not fn then
    local err
    fn, err = loadstring(unlocal(body), "=stdin")
    if not fn then
      local incomplete = err:match("<eof>") ~= nil or err:match("unfinished long") ~= nil
      return nil, incomplete, err
    end
  end
  setfenv(fn, env)
  return fn, false
end

-- Evaluate one complete chunk; write the results or the error to out.
function M.eval(src, env, out)
  out = out or io.stdout
  local fn, is_expr, err = compile(src, env)
  if not fn then
    out:write(err, "\n")
    return false
  end
  local r = pack(xpcall(fn, function(e)
    if os.getenv("MX_REPL_TRACEBACK") then return debug.traceback(tostring(e), 2) end
    return tostring(e)
  end, pack))
  if not r[1] then
    out:write(tostring(r[2]), "\n")
    return false
  end
  local vals = is_expr and r[2] or { n = 0 }
  if vals.n > 0 then
    local parts = {}
    for i = 1, vals.n do parts[#parts + 1] = M.repr(vals[i]) end
    out:write(table.concat(parts, "\t"), "\n")
  end
  return true
end

---------------------------------------------------------------- input
local function readline_reader()
  local ok, rl = pcall(ffi.load, "readline")
  if not ok then ok, rl = pcall(ffi.load, "libreadline.so.8") end
  if not ok then return nil end
  local ok2 = pcall(ffi.cdef, [[
    char *mx_repl_readline(const char *prompt) __asm__("readline");
    void mx_repl_add_history(const char *line) __asm__("add_history");
  ]])
  if not ok2 then return nil end
  return function(prompt)
    local p = rl.mx_repl_readline(prompt)
    if p == nil then return nil end
    local line = ffi.string(p)
    ffi.C.mx_repl_free(p)
    if line:match("%S") then rl.mx_repl_add_history(line) end
    return line
  end
end

local function plain_reader(interactive)
  return function(prompt)
    if interactive then
      io.stdout:write(prompt)
      io.stdout:flush()
    end
    return io.read("*l")
  end
end

-- Run the loop. opts: input (a function(prompt) -> line or nil), out, banner.
function M.run(opts)
  opts = opts or {}
  local interactive = opts.interactive
  if interactive == nil then interactive = isatty(0) end
  local out = opts.out or io.stdout
  local read = opts.input
  if not read then
    if interactive and not os.getenv("MX_REPL_RLWRAP") then read = readline_reader() end
    read = read or plain_reader(interactive)
  end
  local env = opts.env or new_env()
  if interactive and opts.banner ~= false then
    out:write(env.mx._VERSION, " on ", jit and jit.version or _VERSION,
      " — mx, nd, gluon and autograd are loaded; help(x) explains x; Ctrl-D exits\n")
  end
  local buf
  while true do
    local line = read(buf and ">> " or "> ")
    if line == nil then
      if buf then M.eval(buf, env, out) end
      break
    end
    buf = buf and (buf .. "\n" .. line) or line
    if buf:match("^%s*$") then
      buf = nil
    else
      local fn, incomplete = compile(buf, env)
      if fn or not incomplete then -- (on success the second value is is_expr)
        M.eval(buf, env, out)
        buf = nil
      end
    end
    out:flush()
  end
  if interactive then out:write("\n") end
end

return M
