-- mx.progress — a training progress bar.
--
--   local progress = require("mx.progress")
--   local bar = progress.Bar{total = loader:len(), title = "epoch 1/10"}
--   for data, label in loader:iter() do
--     ...
--     bar:update(1, {loss = running_loss, acc = acc}, data:shape()[1])
--   end
--   bar:finish()
--
-- On a terminal the bar redraws one line in place (at most every `interval`
-- seconds): title, bar, batch i/N, the values given, samples/s and the ETA. When the
-- output is not a terminal (a CI log, a pipe) nothing is drawn while it runs and
-- finish() prints one clean line per call: title, N/N, the last values, samples/s and
-- the time from the start to the last update (so an evaluation run between the last
-- batch and finish() is not counted). Options: total, title, out (a file, default io.stdout), tty
-- (true/false; default: isatty of out), width (default: the terminal's, else $COLUMNS
-- or 80), interval
-- (seconds, default 0.1), clock (a function returning seconds; for tests).
local ffi = require("ffi")

local type, tostring, floor, format = type, tostring, math.floor, string.format

-- libc through symbol redirects, so other ffi.cdef's of the same names never clash
ffi.cdef [[
typedef struct mx_progress_timespec { long tv_sec; long tv_nsec; } mx_progress_timespec;
int mx_progress_clock_gettime(int clk, mx_progress_timespec *ts) __asm__("clock_gettime");
int mx_progress_isatty(int fd) __asm__("isatty");
typedef struct mx_progress_winsize { unsigned short row, col, xpixel, ypixel; } mx_progress_winsize;
int mx_progress_ioctl(int fd, unsigned long req, mx_progress_winsize *ws) __asm__("ioctl");
]]
local ts = ffi.new("mx_progress_timespec")

local M = {}

-- Wall-clock seconds (monotonic).
function M.now()
  ffi.C.mx_progress_clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

-- True when file (io.stdout by default; io.stderr) is a terminal.
function M.isatty(file)
  file = file or io.stdout
  local fd = file == io.stderr and 2 or file == io.stdout and 1 or nil
  if not fd then return false end
  return ffi.C.mx_progress_isatty(fd) == 1
end

-- Columns of the terminal behind file (io.stdout by default); nil when unknown.
local ws = ffi.new("mx_progress_winsize")
function M.columns(file)
  file = file or io.stdout
  local fd = file == io.stderr and 2 or file == io.stdout and 1 or nil
  if not fd or jit.os ~= "Linux" then return nil end
  if ffi.C.mx_progress_ioctl(fd, 0x5413, ws) ~= 0 or ws.col == 0 then return nil end -- TIOCGWINSZ
  return ws.col
end

-- 75 -> "1:15", 3725 -> "1:02:05"
function M.format_time(s)
  if s ~= s or s == math.huge or s < 0 then return "?" end
  s = floor(s + 0.5)
  local h, m, sec = floor(s / 3600), floor(s / 60) % 60, s % 60
  if h > 0 then return format("%d:%02d:%02d", h, m, sec) end
  return format("%d:%02d", m, sec)
end

-- 12345 -> "12.3k"
function M.format_rate(r)
  if r >= 1e6 then return format("%.2fM", r / 1e6) end
  if r >= 1e4 then return format("%.1fk", r / 1e3) end
  if r >= 1e3 then return format("%.2fk", r / 1e3) end
  return format("%.1f", r)
end

local function fmt_value(v)
  if type(v) == "number" then
    if v ~= 0 and (math.abs(v) >= 1e5 or math.abs(v) < 1e-3) then return format("%.3e", v) end
    return format("%.4f", v)
  end
  if type(v) == "cdata" and v.item then return fmt_value(v:item()) end
  return tostring(v)
end

-- values: {loss = 0.3, acc = 0.9} (shown sorted, "loss" first) or an ordered list
-- of pairs {{"loss", 0.3}, {"acc", 0.9}}.
local function fmt_values(values)
  if not values then return "" end
  local parts = {}
  if values[1] ~= nil then
    for _, p in ipairs(values) do parts[#parts + 1] = tostring(p[1]) .. " " .. fmt_value(p[2]) end
  else
    local keys = {}
    for k in pairs(values) do keys[#keys + 1] = tostring(k) end
    table.sort(keys, function(a, b)
      if a == "loss" then return b ~= "loss" end
      if b == "loss" then return false end
      return a < b
    end)
    for _, k in ipairs(keys) do parts[#parts + 1] = k .. " " .. fmt_value(values[k]) end
  end
  return table.concat(parts, "  ")
end
M._fmt_values = fmt_values

local Bar = {}
Bar.__index = Bar
M.Bar = setmetatable(Bar, { __call = function(cls, opts) return cls.new(opts) end })

local VALID = { total = true, title = true, out = true, tty = true, width = true, interval = true,
  clock = true }

function Bar.new(opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("Bar: options must be a table", 2) end
  for k in pairs(opts) do
    if not VALID[k] then error("Bar: unknown option '" .. tostring(k) .. "'", 2) end
  end
  if opts.total ~= nil and (type(opts.total) ~= "number" or opts.total < 0) then
    error("Bar: total must be a non-negative number", 2)
  end
  local out = opts.out or io.stdout
  local tty = opts.tty
  if tty == nil then tty = M.isatty(out) end
  local self = setmetatable({
    total = opts.total, title = opts.title or "", out = out, tty = tty,
    width = opts.width or (tty and M.columns(out)) or tonumber(os.getenv("COLUMNS")) or 80,
    interval = opts.interval or 0.1, clock = opts.clock or M.now,
    i = 0, samples = 0, values = nil, drawn = 0, last_len = 0,
  }, Bar)
  self.start = self.clock()
  self.last_draw = -math.huge
  return self
end

-- Seconds since the bar started, samples/s so far.
function Bar.elapsed(self) return self.clock() - self.start end
-- Seconds from the start to the last update (the work the bar measured).
function Bar.busy(self) return (self.t_last or self.clock()) - self.start end
function Bar.rate(self)
  local e = self:elapsed()
  return e > 0 and self.samples / e or 0
end

local function bar_text(frac, w)
  if w < 3 then return "" end
  local fill = floor(frac * w + 1e-9)
  if fill >= w then return "[" .. string.rep("=", w) .. "]" end
  return "[" .. string.rep("=", fill) .. ">" .. string.rep(" ", w - fill - 1) .. "]"
end

function Bar._line(self, final)
  -- the closing line counts until the last update (not the evaluation that may run
  -- between the last batch and finish())
  local e = (final and self.t_last or self.clock()) - self.start
  local rate = e > 0 and self.samples / e or 0
  local total = self.total
  local head = self.title ~= "" and (self.title .. " ") or ""
  local count = total and format("%d/%d", self.i, total) or tostring(self.i)
  local vals = fmt_values(self.values)
  local tail = {}
  if self.samples > 0 then tail[#tail + 1] = M.format_rate(rate) .. " samples/s" end
  if final then
    tail[#tail + 1] = format("%.1fs", e)
  elseif total and self.i > 0 then
    tail[#tail + 1] = "ETA " .. M.format_time(e / self.i * (total - self.i))
  end
  local rest = count .. (vals ~= "" and ("  " .. vals) or "") .. "  " .. table.concat(tail, "  ")
  if final or not self.tty or not total then return head .. rest end
  local w = self.width - #head - #rest - 4 -- bar + brackets + space: one column spare
  if w > 40 then w = 40 end
  local b = w >= 10 and (bar_text(total > 0 and self.i / total or 1, w) .. " ") or ""
  local line = head .. b .. rest
  if #line > self.width - 1 then line = line:sub(1, self.width - 1) end
  return line
end

function Bar._draw(self)
  local line = self:_line(false)
  local pad = self.last_len > #line and string.rep(" ", self.last_len - #line) or ""
  self.out:write("\r", line, pad)
  self.out:flush()
  self.last_len = #line
  self.drawn = self.drawn + 1
end

-- Advance by n batches (default 1), record the latest values and the samples the
-- batches held (for samples/s).
function Bar.update(self, n, values, samples)
  self.i = self.i + (n or 1)
  if values then self.values = values end
  if samples then self.samples = self.samples + samples end
  local t = self.clock()
  self.t_last = t
  if self.tty then
    if t - self.last_draw >= self.interval or (self.total and self.i >= self.total) then
      self.last_draw = t
      self:_draw()
    end
  end
end

-- Final values (optional) and the closing line: on a terminal the bar's line is
-- replaced by the summary; elsewhere the summary is the one line written.
function Bar.finish(self, values)
  if values then self.values = values end
  local line = self:_line(true)
  if self.tty then
    local pad = self.last_len > #line and string.rep(" ", self.last_len - #line) or ""
    self.out:write("\r", line, pad, "\n")
  else
    self.out:write(line, "\n")
  end
  self.out:flush()
  return line
end

return M
