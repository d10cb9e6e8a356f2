-- mx.mon / mx.monitor — MXNet 1.9's Monitor: statistics of an executor's internal
-- arrays every `interval` batches, for debugging a training run.
--
--   local mon = mx.mon.Monitor(interval, stat_func, pattern, sort, monitor_all, {logger=})
--   mod:install_monitor(mon)  (or mon:install(executor); fit{monitor = mon} installs it)
--   mon:tic()    before a forward: every interval-th call activates it
--   mon:toc()    after the backward/update: a list of { step, name, text } of the
--                activated step: every op output the forward computed (with
--                monitor_all, every op's inputs too, named <node>_<input>), the
--                backward's per-node gradients (<node>_backward_output<j>), then every
--                argument and auxiliary state, whose names match `pattern`
--   mon:toc_print()  the same, one line each through the logger: "Batch: %7d %-30s %s"
--
-- stat_func(array) -> NDArray or list of NDArrays (default: norm(x) / sqrt(x:size()), as
-- MXNet's); a 1-element result is written as its number, others as their values. pattern:
-- a Lua pattern matched at the start of the name (MXNet's re.match; ".*" by default).
-- Executors compute the op outputs of an activated step by running their graph with every
-- internal output as an extra head (the same values, one forward), and the backward's
-- rows from the op table's gradient formulas on those values.
local nd = require("mx.nd")
local class = require("mx.core.class")
local ffi = require("ffi")

local type, error, tostring, tonumber, ipairs, pcall, setmetatable, table, string, math, io =
  type, error, tostring, tonumber, ipairs, pcall, setmetatable, table, string, math, io

local M = {}

local function default_stat(x) return nd.norm(x) / math.sqrt(math.max(x:size(), 1)) end

local MONITOR = class.signature("Monitor", { "interval", "stat_func", "pattern", "sort",
  "monitor_all", "logger" })

local Monitor = {}
Monitor.__index = Monitor
M.Monitor = setmetatable({}, { __call = function(_, ...)
  local o = MONITOR(2, ...)
  local iv = o.interval
  if type(iv) ~= "number" or iv % 1 ~= 0 or iv < 1 then
    error("Monitor: interval must be a positive integer, got " .. tostring(iv), 2)
  end
  if o.stat_func ~= nil and type(o.stat_func) ~= "function" then
    error("Monitor: stat_func must be a function(array), got " .. type(o.stat_func), 2)
  end
  local pattern = o.pattern or ".*"
  if type(pattern) ~= "string" then error("Monitor: pattern must be a string, got " .. type(pattern), 2) end
  local ok, err = pcall(string.find, "", "^" .. pattern)
  if not ok then error("Monitor: pattern '" .. pattern .. "' is not a Lua pattern: " .. tostring(err), 2) end
  if o.logger ~= nil and type(o.logger) ~= "function" then
    error("Monitor: logger must be a function(line), got " .. type(o.logger), 2)
  end
  local self = setmetatable({ interval = iv, stat_func = o.stat_func or default_stat,
    pattern = pattern, sort = o.sort == true, monitor_all = o.monitor_all == true,
    logger = o.logger, activated = false, queue = {}, step = 0, exes = {} }, Monitor)
  self.stat_helper = function(name, array)
    if not self.activated or not self:_match(name) then return end
    self.queue[#self.queue + 1] = { self.step, name, self.stat_func(array) }
  end
  return self
end })

function Monitor:_match(name) return name:find("^" .. self.pattern) ~= nil end

-- install(exe): the executor reports its op outputs to this monitor in activated steps
function Monitor:install(exe)
  if type(exe) ~= "table" or type(exe.set_monitor_callback) ~= "function" then
    error("Monitor.install: expected an Executor, got " .. type(exe), 2)
  end
  exe:set_monitor_callback(self.stat_helper, self.monitor_all, function() return self.activated end)
  self.exes[#self.exes + 1] = exe
end

-- the executors `old` replaced by `new` (a module's executors after a reshape)
function Monitor:_replace(old, new)
  local drop = {}
  for _, e in ipairs(old or {}) do drop[e] = true end
  local kept = {}
  for _, e in ipairs(self.exes) do if not drop[e] then kept[#kept + 1] = e end end
  self.exes = kept
  for _, e in ipairs(new) do self:install(e) end
end

function Monitor:tic()
  if self.step % self.interval == 0 then
    self.queue = {}
    self.activated = true
  end
  self.step = self.step + 1
end

-- a number as NumPy's str: the shortest digits that read back to the same value of the
-- array's dtype (float32: 0.111803405)
local f32 = ffi.new("float[1]")
local function num_str(x, dtype)
  if x ~= x or x == math.huge or x == -math.huge then
    return x ~= x and "nan" or (x > 0 and "inf" or "-inf")
  end
  local float = dtype == "float32" or dtype == "float16" or dtype == "bfloat16" or dtype == "float64"
  if not float then return string.format("%d", x) end
  local s = string.format("%.17g", x)
  local single = dtype ~= "float64"
  if single then f32[0] = x end
  local want = single and f32[0] or x
  for p = 1, 17 do
    local t = string.format("%." .. p .. "g", x)
    local back = tonumber(t)
    if single then
      f32[0] = back
      back = f32[0]
    end
    if back == want then
      s = t
      break
    end
  end
  if not s:find("[%.eni]") then s = s .. ".0" end -- (NumPy writes 0.0, 2.0)
  return s
end

local function text_of(v)
  local s = {}
  local list = nd.is_tensor(v) and { v } or v
  if type(list) ~= "table" then
    error("Monitor: stat_func must return an NDArray or a list of NDArrays, got " .. type(v), 3)
  end
  for _, a in ipairs(list) do
    if not nd.is_tensor(a) then
      error("Monitor: stat_func must return an NDArray or a list of NDArrays, got a " .. type(a), 3)
    end
    local dt = a:dtype()
    if a:size() == 1 then
      s[#s + 1] = num_str(a:reshape { 1 }:tolist()[1], dt) .. "\t"
    else
      local vals = {}
      for i, x in ipairs(a:reshape(-1):tolist()) do vals[i] = num_str(x, dt) end
      s[#s + 1] = "[" .. table.concat(vals, " ") .. "]\t"
    end
  end
  return table.concat(s)
end

function Monitor:toc()
  if not self.activated then return {} end
  for _, exe in ipairs(self.exes) do
    local q = self.queue
    for i, name in ipairs(exe.arg_names) do
      if self:_match(name) then q[#q + 1] = { self.step, name, self.stat_func(exe.arg_arrays[i]) } end
    end
    for i, name in ipairs(exe.aux_names) do
      if self:_match(name) then q[#q + 1] = { self.step, name, self.stat_func(exe.aux_arrays[i]) } end
    end
  end
  self.activated = false
  local q = self.queue
  if self.sort then
    for i, e in ipairs(q) do e[4] = i end
    table.sort(q, function(a, b) if a[2] ~= b[2] then return a[2] < b[2] end return a[4] < b[4] end)
  end
  local res = {}
  for i, e in ipairs(q) do res[i] = { e[1], e[2], text_of(e[3]) } end
  self.queue = {}
  return res
end

function Monitor:toc_print()
  local lg = self.logger or function(line) io.stderr:write(line, "\n") end
  for _, r in ipairs(self:toc()) do lg(string.format("Batch: %7d %-30s %s", r[1], r[2], r[3])) end
end

return M
