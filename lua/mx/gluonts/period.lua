-- mx.gluonts.period — frequencies and periods (pandas' Period, as GluonTS uses it): a
-- frequency string ("H", "30min", "D", "W", "M", "Q", "Y"; also "T", "h", "A", "12H",
-- "W-SUN", "MS", "QS", "ME", "QE", "YE", "AS") and periods as integer ordinals of it, so a
-- series' timestamps are start + k. Calendar arithmetic is proleptic Gregorian (Howard
-- Hinnant's days_from_civil). As in pandas, a monthly, quarterly, weekly (weeks end on
-- Sunday) or yearly period's fields (month, day, ...) are those of its last day; a daily,
-- hourly or minute period's are those of its start.
--
--   local P = require("mx.gluonts.period")
--   local f = P.freq("30min")            -- {base = "min", n = 30, name = "30min"}
--   local p = P.parse("1949-01", "M")    -- a period {freq = f, ord = ...}
--   P.add(p, 3)  P.fields(p)  P.tostring(p)  P.diff(a, b)
local type, error, tostring, floor = type, error, tostring, math.floor

local M = {}

local BASES = { H = "H", h = "H", min = "min", T = "min", D = "D", W = "W", M = "M", MS = "M",
  ME = "M", Q = "Q", QS = "Q", QE = "Q", Y = "Y", A = "Y", YE = "Y", AS = "Y", YS = "Y",
  S = "S", s = "S" }
local MINUTES = { S = 1 / 60, min = 1, H = 60, D = 1440 }

-- freq(str) -> {base=, n=, name=}; errors name the string.
function M.freq(s, level)
  if type(s) == "table" and s.base then return s end
  if type(s) ~= "string" then
    error("gluonts: freq must be a string such as \"H\", \"30min\", \"D\", \"W\", \"M\", got "
      .. type(s), (level or 1) + 1)
  end
  local n, b = s:match("^(%d*)([%a]+)")
  local suffix = s:match("%-(%u+)$")
  local base = b and BASES[b]
  if not base or (suffix and base ~= "W" and base ~= "Q" and base ~= "Y") or
    (suffix and base == "W" and suffix ~= "SUN") then
    error("gluonts: unsupported frequency '" .. s .. "' (supported: S, min/T, H, D, W, M, Q, Y "
      .. "with an optional multiple, e.g. \"30min\", \"12H\")", (level or 1) + 1)
  end
  n = tonumber(n ~= "" and n or "1")
  if n < 1 then error("gluonts: frequency multiple must be positive in '" .. s .. "'", (level or 1) + 1) end
  if (base == "Q" or base == "W" or base == "Y") and n ~= 1 then
    error("gluonts: only multiple 1 is supported for frequency '" .. s .. "'", (level or 1) + 1)
  end
  local name = (n > 1 and tostring(n) or "") .. base
  return { base = base, n = n, name = name }
end

---------------------------------------------------------------- calendar
local function days_from_civil(y, m, d)
  y = m <= 2 and y - 1 or y
  local era = floor(y / 400)
  local yoe = y - era * 400
  local mp = (m + 9) % 12
  local doy = floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + floor(yoe / 4) - floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end
M.days_from_civil = days_from_civil

local function civil_from_days(z)
  z = z + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local y = yoe + era * 400
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local d = doy - floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  return m <= 2 and y + 1 or y, m, d
end
M.civil_from_days = civil_from_days

local function is_leap(y) return (y % 4 == 0 and y % 100 ~= 0) or y % 400 == 0 end
local MDAYS = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 }
local function month_days(y, m) return (m == 2 and is_leap(y)) and 29 or MDAYS[m] end

-- parse a date "YYYY", "YYYY-MM", "YYYY-MM-DD", "YYYY-MM-DD HH:MM[:SS]", "YYYYQn" into
-- {y, mo, d, h, mi, s}
local function parse_date(s, level)
  if type(s) ~= "string" then
    error("gluonts: start must be a date string such as \"1949-01\" or \"2014-01-01 00:00\", got "
      .. type(s), level + 1)
  end
  local y, q = s:match("^(%d%d%d%d)[Qq](%d)$")
  if y then return { tonumber(y), tonumber(q) * 3 - 2, 1, 0, 0, 0 } end
  local t = {}
  local rest = s
  local yy, mo, d = rest:match("^(%d%d%d%d)%-?(%d?%d?)%-?(%d?%d?)")
  if not yy then error("gluonts: cannot parse the date '" .. s .. "'", level + 1) end
  t[1], t[2], t[3] = tonumber(yy), tonumber(mo ~= "" and mo or "1"), tonumber(d ~= "" and d or "1")
  local h, mi, sec = s:match("[ T](%d%d?):(%d%d):?(%d?%d?)")
  t[4], t[5], t[6] = tonumber(h or 0), tonumber(mi or 0), tonumber(sec ~= "" and sec or "0")
  if t[2] < 1 or t[2] > 12 or t[3] < 1 or t[3] > month_days(t[1], t[2]) or t[4] > 23 or t[5] > 59 then
    error("gluonts: invalid date '" .. s .. "'", level + 1)
  end
  return t
end

---------------------------------------------------------------- periods
-- the period of freq f containing the date t
local function ordinal(f, t)
  local b = f.base
  if b == "Y" then return t[1] - 1970 end
  if b == "Q" then return (t[1] - 1970) * 4 + floor((t[2] - 1) / 3) end
  if b == "M" then return (t[1] - 1970) * 12 + t[2] - 1 end
  local days = days_from_civil(t[1], t[2], t[3])
  if b == "W" then return floor((days + 3) / 7) end -- weeks Monday..Sunday
  local minutes = days * 1440 + t[4] * 60 + t[5] + t[6] / 60
  return floor(minutes / (MINUTES[b] * f.n) + 1e-9)
end

function M.parse(s, freq, level)
  level = level or 1
  local f = M.freq(freq, level + 1)
  if type(s) == "table" and s.ord then
    if s.freq.name ~= f.name then
      error("gluonts: start has frequency " .. s.freq.name .. ", the dataset " .. f.name, level + 1)
    end
    return s
  end
  return { freq = f, ord = ordinal(f, parse_date(s, level + 1)) }
end

function M.new(f, ord) return { freq = M.freq(f), ord = ord } end
function M.add(p, k) return { freq = p.freq, ord = p.ord + k } end
function M.diff(a, b) return a.ord - b.ord end

-- fields(p) -> {year, month, day, hour, minute, second, dayofweek (0 = Monday),
-- dayofyear (1-based), week (ISO)} of the period (its last day for W/M/Q/Y)
function M.fields(p)
  local f, o = p.freq, p.ord
  local b = f.base
  local y, m, d
  local h, mi, s = 0, 0, 0
  local days
  if b == "Y" then
    y, m, d = 1970 + o, 12, 31
  elseif b == "Q" then
    y = 1970 + floor(o / 4)
    m = (o % 4) * 3 + 3
    d = month_days(y, m)
  elseif b == "M" then
    y = 1970 + floor(o / 12)
    m = o % 12 + 1
    d = month_days(y, m)
  elseif b == "W" then
    days = o * 7 + 3 -- the Sunday
    y, m, d = civil_from_days(days)
  else
    local minutes = o * MINUTES[b] * f.n
    days = floor(minutes / 1440)
    local r = minutes - days * 1440
    h = floor(r / 60)
    mi = floor(r - h * 60)
    s = floor((r - h * 60 - mi) * 60 + 0.5)
    y, m, d = civil_from_days(days)
  end
  days = days or days_from_civil(y, m, d)
  local dow = (days + 3) % 7 -- 1970-01-01 was a Thursday (3)
  local doy = days - days_from_civil(y, 1, 1) + 1
  -- ISO week: the week of the Thursday of this date's week
  local thu = days - dow + 3
  local ty = civil_from_days(thu)
  local week = floor((thu - days_from_civil(ty, 1, 1)) / 7) + 1
  return { year = y, month = m, day = d, hour = h, minute = mi, second = s, dayofweek = dow,
    dayofyear = doy, week = week }
end

-- pandas' str(Period): "1949-01", "1960Q1", "1949", "2020-01-06/2020-01-12", "2014-01-01",
-- "2014-01-01 00:30"
function M.tostring(p)
  local b, t = p.freq.base, M.fields(p)
  if b == "Y" then return string.format("%04d", t.year) end
  if b == "Q" then return string.format("%04dQ%d", t.year, floor((t.month - 1) / 3) + 1) end
  if b == "M" then return string.format("%04d-%02d", t.year, t.month) end
  if b == "W" then
    local y, m, d = civil_from_days(p.ord * 7 - 3)
    return string.format("%04d-%02d-%02d/%04d-%02d-%02d", y, m, d, t.year, t.month, t.day)
  end
  if b == "D" then return string.format("%04d-%02d-%02d", t.year, t.month, t.day) end
  if b == "S" then
    return string.format("%04d-%02d-%02d %02d:%02d:%02d", t.year, t.month, t.day, t.hour,
      t.minute, t.second)
  end
  return string.format("%04d-%02d-%02d %02d:%02d", t.year, t.month, t.day, t.hour, t.minute)
end

-- a number for plots: the year as a fraction (start of the period)
function M.decimal_year(p)
  local t = M.fields(p)
  local b = p.freq.base
  if b == "M" then return t.year + (t.month - 1) / 12 end
  if b == "Q" then return t.year + (t.month - 3) / 12 end
  if b == "Y" then return t.year end
  local days = days_from_civil(t.year, t.month, t.day)
  local y0 = days_from_civil(t.year, 1, 1)
  local len = is_leap(t.year) and 366 or 365
  return t.year + (days - y0 + (t.hour * 60 + t.minute) / 1440) / len
end

return M
