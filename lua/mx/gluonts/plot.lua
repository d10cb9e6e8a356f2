-- mx.gluonts.plot — a forecast with its prediction intervals as an SVG file (no plotting
-- library; written atomically like mx.viz's plots).
--
--   gts.plot.plot_forecast("f.svg", ts, forecast, {title=, history=48, intervals={0.5, 0.9}})
--
-- ts: the series entry (start, target) reaching at least to the forecast's end (its values
-- over the forecast range are drawn as the truth); forecast: a SampleForecast or a
-- QuantileForecast. Draws the last `history` values before the forecast, the median, the
-- central intervals (shaded, widest lightest) and the truth.
local P = require("mx.gluonts.period")
local file = require("mx.core.file")

local M = {}

local fmt = string.format

function M.plot_forecast(path, ts, fc, o)
  o = o or {}
  local W, H, L, R, Tm, B = o.width or 760, o.height or 360, 60, 20, 36, 40
  local h = fc.prediction_length
  local off = P.diff(fc.start_date, ts.start)
  local hist = math.min(o.history or 4 * h, off)
  local xs, ys = {}, {}
  for k = off - hist + 1, math.min(#ts.target, off + h) do
    xs[#xs + 1] = k
    ys[#ys + 1] = ts.target[k]
  end
  local ints = o.intervals or { 0.5, 0.9 }
  local bands = {}
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(ys) do if v == v then lo, hi = math.min(lo, v), math.max(hi, v) end end
  for i, c in ipairs(ints) do
    local a, b = fc:quantile((1 - c) / 2), fc:quantile((1 + c) / 2)
    bands[i] = { a, b, c }
    for t = 1, h do lo, hi = math.min(lo, a[t]), math.max(hi, b[t]) end
  end
  local med = fc:quantile(0.5)
  if hi <= lo then hi = lo + 1 end
  local pad = (hi - lo) * 0.05
  lo, hi = lo - pad, hi + pad
  local x0, x1 = off - hist + 1, off + h
  local function X(k) return L + (k - x0) / math.max(1, x1 - x0) * (W - L - R) end
  local function Y(v) return Tm + (hi - v) / (hi - lo) * (H - Tm - B) end
  local s = { fmt('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
    .. 'font-family="sans-serif" font-size="12">', W, H),
    fmt('<rect width="%d" height="%d" fill="white"/>', W, H),
    fmt('<text x="%d" y="20" font-size="14">%s</text>', L,
      ((o.title or "forecast"):gsub("&", "&amp;"):gsub("<", "&lt;"))) }
  for k = 0, 4 do
    local v = lo + (hi - lo) * k / 4
    s[#s + 1] = fmt('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>', L, W - R, Y(v), Y(v))
    s[#s + 1] = fmt('<text x="%d" y="%.1f" text-anchor="end">%.4g</text>', L - 4, Y(v) + 4, v)
  end
  for _, k in ipairs { x0, off + 1, x1 } do
    s[#s + 1] = fmt('<text x="%.1f" y="%d" text-anchor="middle">%s</text>', X(k), H - 14,
      P.tostring(P.add(ts.start, k - 1)))
  end
  local shades = { "#9ecae1", "#c6dbef", "#deebf7" }
  for i = #bands, 1, -1 do
    local a, b = bands[i][1], bands[i][2]
    local pts = {}
    for t = 1, h do pts[#pts + 1] = fmt("%.1f,%.1f", X(off + t), Y(b[t])) end
    for t = h, 1, -1 do pts[#pts + 1] = fmt("%.1f,%.1f", X(off + t), Y(a[t])) end
    s[#s + 1] = fmt('<polygon points="%s" fill="%s" stroke="none"/>', table.concat(pts, " "),
      shades[math.min(i, 3)])
  end
  local function line(kx, vy, color, w)
    local pts = {}
    for i = 1, #kx do if vy[i] == vy[i] then pts[#pts + 1] = fmt("%.1f,%.1f", X(kx[i]), Y(vy[i])) end end
    return fmt('<polyline points="%s" fill="none" stroke="%s" stroke-width="%s"/>',
      table.concat(pts, " "), color, w)
  end
  s[#s + 1] = line(xs, ys, "#222", 1.5)
  local mk = {}
  for t = 1, h do mk[t] = off + t end
  s[#s + 1] = line(mk, med, "#08519c", 2)
  local leg = { { "#222", "observed" }, { "#08519c", "median forecast" } }
  for i = #bands, 1, -1 do
    leg[#leg + 1] = { shades[math.min(i, 3)], fmt("%d%% interval", math.floor(bands[i][3] * 100 + 0.5)) }
  end
  for i, l in ipairs(leg) do
    local y = Tm + 6 + (i - 1) * 16
    s[#s + 1] = fmt('<rect x="%d" y="%d" width="14" height="8" fill="%s"/>', L + 10, y, l[1])
    s[#s + 1] = fmt('<text x="%d" y="%d">%s</text>', L + 30, y + 8, l[2])
  end
  s[#s + 1] = "</svg>\n"
  file.write_atomic("plot_forecast", path, table.concat(s, "\n"), 2)
  return path
end

return M
