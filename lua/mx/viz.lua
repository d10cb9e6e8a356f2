-- mx.viz — training curves as an SVG file any browser opens (no plotting library), and
-- GluonCV's plot_image / plot_bbox / plot_mask as PNG or SVG files (mx/viz/image.lua).
--
--   mx.viz.plot_curves("curves.svg", {
--     title = "LeNet on Fashion-MNIST", xlabel = "epoch",
--     panels = {
--       { title = "loss", ylabel = "cross-entropy",
--         series = { { name = "train", values = train_loss }, { name = "test", values = test_loss } } },
--       { title = "accuracy", ylabel = "accuracy",
--         series = { { name = "train", values = train_acc }, { name = "test", values = test_acc } } },
--     } })
--
-- plot_curves(path, opts): one panel (opts.series, opts.ylabel) or several side by side
-- (opts.panels, each {series=, title=, xlabel=, ylabel=}). A series is {name=, values=
-- {y1, y2, ...}, x= {x1, ...} (default 1, 2, ...: epochs)}. Each panel has axes with
-- "nice" ticks, a grid, a legend, and one colour per series. Options: title, xlabel,
-- ylabel, series | panels, width (per panel, default 480), height (default 360).
-- The file is written atomically (temp file beside it + fsync + rename): a reader
-- sees the old plot or the new one, never a partial file. Returns path.
local check_opts = require("mx.core.class").check_opts

local type, error, tostring, ipairs, format = type, error, tostring, ipairs, string.format
local floor, log10, abs, huge = math.floor, math.log10, math.abs, math.huge

local M = {}

local write_atomic = require("mx.core.file").write_atomic

---------------------------------------------------------------- checks
local function finite(v) return type(v) == "number" and v == v and abs(v) ~= huge end

local SERIES_OPTS = { name = true, values = true, x = true }
local PANEL_OPTS = { series = true, title = true, xlabel = true, ylabel = true }
local PLOT_OPTS = { series = true, panels = true, title = true, xlabel = true, ylabel = true,
  width = true, height = true }

local function check_str(who, what, v, level)
  if v ~= nil and type(v) ~= "string" and type(v) ~= "number" then
    error(format("%s: %s must be a string, got %s", who, what, type(v)), level + 1)
  end
end

local function check_numbers(who, what, list, level)
  if type(list) ~= "table" or #list == 0 then
    error(format("%s: %s must be a non-empty list of numbers, got %s", who, what,
      type(list) == "table" and "an empty table" or type(list)), level + 1)
  end
  for i = 1, #list do
    if not finite(list[i]) then
      error(format("%s: %s[%d] must be a finite number, got %s", who, what, i,
        tostring(list[i])), level + 1)
    end
  end
end

-- A checked panel: {title, xlabel, ylabel, series = {{name, x, y}, ...}}.
local function check_panel(who, p, where, defaults, level)
  level = level + 1
  local series = p.series
  if type(series) ~= "table" or #series == 0 then
    error(format("%s: %sseries must be a non-empty list of {name=, values=}", who, where), level)
  end
  local out = { title = p.title, xlabel = p.xlabel or defaults.xlabel,
    ylabel = p.ylabel or defaults.ylabel, series = {} }
  check_str(who, where .. "title", out.title, level)
  check_str(who, where .. "xlabel", out.xlabel, level)
  check_str(who, where .. "ylabel", out.ylabel, level)
  for i, s in ipairs(series) do
    local w = format("%sseries[%d]", where, i)
    if type(s) ~= "table" then error(format("%s: %s must be a table, got %s", who, w, type(s)),
      level) end
    check_opts(who .. ": " .. w, s, SERIES_OPTS, level)
    if s.name == nil then error(format("%s: %s needs a name", who, w), level) end
    check_str(who, w .. ".name", s.name, level)
    check_numbers(who, w .. ".values", s.values, level)
    local x = s.x
    if x == nil then
      x = {}
      for j = 1, #s.values do x[j] = j end
    else
      check_numbers(who, w .. ".x", x, level)
      if #x ~= #s.values then
        error(format("%s: %s.x has %d numbers but values has %d", who, w, #x, #s.values), level)
      end
    end
    out.series[i] = { name = tostring(s.name), x = x, y = s.values }
  end
  return out
end

---------------------------------------------------------------- drawing
local function xml_escape(s)
  return (tostring(s):gsub("[&<>\"]", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;",
    ['"'] = "&quot;" }))
end

-- Ticks at 1, 2 or 5 times a power of ten covering [lo, hi] with about n steps; the
-- range widened to whole steps. A flat range is opened around its value.
local function nice_ticks(lo, hi, n)
  if hi - lo < 1e-12 * (abs(lo) + abs(hi) + 1) then
    local d = abs(lo) > 0 and abs(lo) * 0.1 or 1
    lo, hi = lo - d, hi + d
  end
  local raw = (hi - lo) / n
  local p = 10 ^ floor(log10(raw))
  local step = p
  for _, m in ipairs { 1, 2, 5, 10 } do
    step = m * p
    if step >= raw then break end
  end
  local a, b = floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step
  local ticks = {}
  for i = 0, floor((b - a) / step + 0.5) do ticks[#ticks + 1] = a + i * step end
  return a, b, ticks
end
M._nice_ticks = nice_ticks

local function tick_label(v)
  if abs(v) < 1e-12 then return "0" end
  return (format("%.6g", v))
end

local COLORS = { "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
  "#7f7f7f", "#bcbd22", "#17becf" }

local function draw_panel(out, p, ox, w, h)
  local L, R, T, B = 64, 16, 44, 48 -- margins: axis labels left and below, title above
  local pw, ph = w - L - R, h - T - B
  local xmin, xmax, ymin, ymax = huge, -huge, huge, -huge
  for _, s in ipairs(p.series) do
    for j = 1, #s.y do
      local x, y = s.x[j], s.y[j]
      if x < xmin then xmin = x end
      if x > xmax then xmax = x end
      if y < ymin then ymin = y end
      if y > ymax then ymax = y end
    end
  end
  local x0, x1, xt = nice_ticks(xmin, xmax, 6)
  local y0, y1, yt = nice_ticks(ymin, ymax, 5)
  local function px(x) return ox + L + (x - x0) / (x1 - x0) * pw end
  local function py(y) return T + ph - (y - y0) / (y1 - y0) * ph end
  local o = #out
  local function put(s) o = o + 1; out[o] = s end
  put('<g class="panel">')
  if p.title then
    put(format('<text class="title" x="%.1f" y="%d" text-anchor="middle" font-size="15" '
      .. 'font-weight="bold">%s</text>', ox + L + pw / 2, 22, xml_escape(p.title)))
  end
  put(format('<rect x="%.1f" y="%d" width="%d" height="%d" fill="white" stroke="#333"/>',
    ox + L, T, pw, ph))
  for _, v in ipairs(xt) do
    local x = px(v)
    put(format('<line x1="%.2f" y1="%d" x2="%.2f" y2="%d" stroke="#ddd"/>', x, T, x, T + ph))
    put(format('<text class="xtick" x="%.2f" y="%d" text-anchor="middle" font-size="11">%s</text>',
      x, T + ph + 16, tick_label(v)))
  end
  for _, v in ipairs(yt) do
    local y = py(v)
    put(format('<line x1="%.1f" y1="%.2f" x2="%.1f" y2="%.2f" stroke="#ddd"/>', ox + L, y,
      ox + L + pw, y))
    put(format('<text class="ytick" x="%.1f" y="%.2f" text-anchor="end" font-size="11">%s</text>',
      ox + L - 6, y + 4, tick_label(v)))
  end
  if p.xlabel then
    put(format('<text class="xlabel" x="%.1f" y="%d" text-anchor="middle" font-size="12">%s</text>',
      ox + L + pw / 2, h - 10, xml_escape(p.xlabel)))
  end
  if p.ylabel then
    put(format('<text class="ylabel" x="%.1f" y="%.1f" text-anchor="middle" font-size="12" '
      .. 'transform="rotate(-90 %.1f %.1f)">%s</text>', ox + 16, T + ph / 2, ox + 16, T + ph / 2,
      xml_escape(p.ylabel)))
  end
  for i, s in ipairs(p.series) do
    local color = COLORS[(i - 1) % #COLORS + 1]
    local pts = {}
    for j = 1, #s.y do pts[j] = format("%.2f,%.2f", px(s.x[j]), py(s.y[j])) end
    put(format('<g class="series" data-name="%s">', xml_escape(s.name)))
    put(format('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>', color,
      table.concat(pts, " ")))
    if #pts <= 60 then
      for j = 1, #s.y do
        put(format('<circle cx="%.2f" cy="%.2f" r="2.5" fill="%s"/>', px(s.x[j]), py(s.y[j]),
          color))
      end
    end
    put("</g>")
  end
  -- legend, top right inside the plot area
  local lw, lh = 0, 16 * #p.series + 8
  for _, s in ipairs(p.series) do lw = math.max(lw, #s.name) end
  lw = lw * 7 + 40
  local lx, ly = ox + L + pw - lw - 8, T + 8
  put(format('<g class="legend"><rect x="%.1f" y="%d" width="%d" height="%d" fill="white" '
    .. 'fill-opacity="0.85" stroke="#999"/>', lx, ly, lw, lh))
  for i, s in ipairs(p.series) do
    local color = COLORS[(i - 1) % #COLORS + 1]
    local y = ly + 4 + 16 * (i - 1) + 8
    put(format('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"/>',
      lx + 6, y, lx + 26, y, color))
    put(format('<text x="%.1f" y="%d" font-size="11">%s</text>', lx + 32, y + 4,
      xml_escape(s.name)))
  end
  put("</g>")
  put("</g>")
end

-- plot_curves(path, opts): see the top of this file.
function M.plot_curves(path, opts)
  local who = "mx.viz.plot_curves"
  if type(path) ~= "string" or path == "" then
    error(who .. ": path must be a non-empty string, got " .. type(path), 2)
  end
  if type(opts) ~= "table" then error(who .. ": opts must be a table, got " .. type(opts), 2) end
  opts = check_opts(who, opts, PLOT_OPTS, 2)
  local W, H = opts.width or 480, opts.height or 360
  for _, k in ipairs { "width", "height" } do
    local v = k == "width" and W or H
    if type(v) ~= "number" or v < 160 or v % 1 ~= 0 then
      error(format("%s: %s must be an integer >= 160, got %s", who, k, tostring(v)), 2)
    end
  end
  check_str(who, "title", opts.title, 2)
  local panels = {}
  if opts.panels ~= nil then
    if opts.series ~= nil then
      error(who .. ": give series (one panel) or panels, not both", 2)
    end
    if type(opts.panels) ~= "table" or #opts.panels == 0 then
      error(who .. ": panels must be a non-empty list of {series=, title=, xlabel=, ylabel=}", 2)
    end
    for i, p in ipairs(opts.panels) do
      if type(p) ~= "table" then
        error(format("%s: panels[%d] must be a table, got %s", who, i, type(p)), 2)
      end
      check_opts(format("%s: panels[%d]", who, i), p, PANEL_OPTS, 2)
      panels[i] = check_panel(who, p, format("panels[%d].", i), opts, 2)
    end
  else
    if opts.series == nil then error(who .. ": give series (one panel) or panels", 2) end
    panels[1] = check_panel(who, { series = opts.series, xlabel = opts.xlabel,
      ylabel = opts.ylabel }, "", opts, 2)
  end
  local top = opts.title and 28 or 0
  local total_w = W * #panels
  local out = { format('<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" '
    .. 'width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">', total_w, H + top,
    total_w, H + top) }
  out[#out + 1] = format('<rect width="%d" height="%d" fill="white"/>', total_w, H + top)
  if opts.title then
    out[#out + 1] = format('<text class="suptitle" x="%.1f" y="20" text-anchor="middle" '
      .. 'font-size="17" font-weight="bold">%s</text>', total_w / 2, xml_escape(opts.title))
  end
  out[#out + 1] = format('<g transform="translate(0,%d)">', top)
  for i, p in ipairs(panels) do draw_panel(out, p, (i - 1) * W, W, H) end
  out[#out + 1] = "</g>"
  out[#out + 1] = "</svg>\n"
  write_atomic(who, path, table.concat(out, "\n"), 2)
  return path
end

-- the pictures: plot_image, plot_bbox, plot_mask (lua/mx/viz/image.lua)
for k, v in pairs(require("mx.viz.image")) do M[k] = v end

return M
