-- mx.viz.plot_curves: the SVG is well-formed XML holding every series with its points,
-- the file is replaced atomically, and bad input is an error at the caller's line.
local mx = require("mx")
local viz = mx.viz
local H = require("helpers.la")
local FILE = "viz_spec.lua"

local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)
local path = dir .. "/curves.svg"
teardown(function() os.execute("rm -rf " .. dir) end)

local function read(p)
  local f = assert(io.open(p, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end
local function listdir(d)
  local r = {}
  local p = io.popen("ls -A " .. d)
  for l in p:lines() do r[#r + 1] = l end
  p:close()
  return r
end

-- A small XML checker: every element closes in order, attributes are quoted, text
-- holds no raw '<' or '&' outside entities. Returns the elements as
-- {name=, attrs={...}} in document order.
local function parse_xml(s)
  s = s:gsub("^<%?xml[^>]*%?>%s*", "")
  local stack, elems, pos = {}, {}, 1
  while pos <= #s do
    local lt = s:find("<", pos, true)
    local text = s:sub(pos, (lt or #s + 1) - 1)
    assert(not text:find("&[^#%a]"), "raw & in text: " .. text)
    if not lt then break end
    local gt = s:find(">", lt, true)
    assert(gt, "unterminated tag at " .. lt)
    local tag = s:sub(lt + 1, gt - 1)
    if tag:sub(1, 1) == "/" then
      local name = tag:sub(2)
      assert(stack[#stack] == name, "closing " .. name .. ", open " .. tostring(stack[#stack]))
      stack[#stack] = nil
    else
      local selfclose = tag:sub(-1) == "/"
      if selfclose then tag = tag:sub(1, -2) end
      local name, rest = tag:match("^([%w:_-]+)(.*)$")
      assert(name, "bad tag <" .. tag .. ">")
      local attrs = {}
      rest = rest:gsub('%s+([%w:_-]+)="([^"<]*)"', function(k, v)
        attrs[k] = v
        return ""
      end)
      assert(rest:match("^%s*$"), "malformed attributes in <" .. tag .. ">")
      elems[#elems + 1] = { name = name, attrs = attrs }
      if not selfclose then stack[#stack + 1] = name end
    end
    pos = gt + 1
  end
  assert(#stack == 0, "unclosed " .. tostring(stack[#stack]))
  return elems
end

local function series_of(elems)
  local r, cur = {}, nil
  for _, e in ipairs(elems) do
    if e.name == "g" and e.attrs.class == "series" then
      cur = { name = e.attrs["data-name"] }
      r[#r + 1] = cur
    elseif e.name == "polyline" and cur then
      local n = 0
      for _ in e.attrs.points:gmatch("[-%d.]+,[-%d.]+") do n = n + 1 end
      cur.points = n
      cur = nil
    end
  end
  return r
end

describe("mx.viz.plot_curves", function()
  it("writes a well-formed SVG with two panels, every series and its points, a legend", function()
    local loss = { 2.3, 1.2, 0.8, 0.61, 0.55 }
    local acc = { 0.41, 0.73, 0.82, 0.87, 0.9 }
    assert.are.equal(path, viz.plot_curves(path, { title = "LeNet <Fashion-MNIST> & co",
      xlabel = "epoch", panels = {
        { title = "loss", ylabel = "cross-entropy", series = {
          { name = "train", values = loss }, { name = "test", values = { 2, 1.3, 1, 0.9, 0.85 } } } },
        { title = "accuracy", series = { { name = "train", values = acc },
          { name = "test", values = { 0.5, 0.7, 0.8, 0.85, 0.88 }, x = { 1, 2, 3, 4, 5 } } } },
      } }))
    local s = read(path)
    local elems = parse_xml(s)
    assert.are.equal("svg", elems[1].name)
    assert.are.equal("960", elems[1].attrs.width) -- 2 panels x 480
    assert.truthy(s:find("LeNet &lt;Fashion-MNIST&gt; &amp; co", 1, true))
    local ser = series_of(elems)
    assert.are.equal(4, #ser)
    for i, name in ipairs { "train", "test", "train", "test" } do
      assert.are.equal(name, ser[i].name)
      assert.are.equal(5, ser[i].points)
    end
    local panels, legends, yt = 0, 0, 0
    for _, e in ipairs(elems) do
      if e.attrs.class == "panel" then panels = panels + 1 end
      if e.attrs.class == "legend" then legends = legends + 1 end
      if e.attrs.class == "ytick" then yt = yt + 1 end
    end
    assert.are.equal(2, panels)
    assert.are.equal(2, legends)
    assert.truthy(yt >= 6)
    assert.truthy(s:find(">cross%-entropy<"))
    assert.truthy(s:find(">epoch<"))
  end)

  it("ticks are 1/2/5 steps covering the data", function()
    local lo, hi, t = viz._nice_ticks(0.013, 0.97, 5)
    assert.are.same({ 0, 1 }, { lo, hi })
    assert.are.equal(6, #t)
    assert.is_true(math.abs(t[2] - 0.2) < 1e-12)
    lo, hi = viz._nice_ticks(3, 3, 5) -- a flat series still gets a range
    assert.is_true(lo < 3 and hi > 3)
    lo, hi, t = viz._nice_ticks(1, 47, 6)
    assert.are.same({ 0, 50, 10 }, { lo, hi, t[2] })
  end)

  it("replaces the file atomically: no temp file is left, a failed call keeps the old plot",
    function()
    viz.plot_curves(path, { series = { { name = "first", values = { 1, 2, 3 } } } })
    local before = read(path)
    assert.are.same({ "curves.svg" }, listdir(dir))
    viz.plot_curves(path, { series = { { name = "second", values = { 3, 2 } } } })
    local after = read(path)
    assert.truthy(after:find('data-name="second"', 1, true))
    assert.falsy(after:find('data-name="first"', 1, true))
    assert.are.same({ "curves.svg" }, listdir(dir))
    assert.has_error(function()
      viz.plot_curves(path, { series = { { name = "bad", values = { 1, 0 / 0 } } } })
    end)
    assert.are.equal(after, read(path))
    assert.are_not.equal(before, after)
    -- a directory that cannot hold the temp file: an error naming the path
    local one, nowhere = { series = { { name = "a", values = { 1 } } } }, dir .. "/no/such/x.svg"
    H.assert_error(function(mark) mark() viz.plot_curves(nowhere, one) end, FILE,
      "cannot create a temporary file next to '" .. nowhere .. "'")
    assert.are.same({ "curves.svg" }, listdir(dir))
  end)

  it("bad input is an error naming the argument, at the caller's line", function()
    local function bad(opts, msg)
      H.assert_error(function(mark) mark() viz.plot_curves(path, opts) end, FILE, msg)
    end
    H.assert_error(function(mark) mark() viz.plot_curves(5, {}) end, FILE,
      "mx.viz.plot_curves: path must be a non-empty string, got number")
    bad(nil, "opts must be a table")
    bad({}, "give series (one panel) or panels")
    bad({ series = {} }, "series must be a non-empty list")
    bad({ series = { { values = { 1 } } } }, "series[1] needs a name")
    bad({ series = { { name = "a", values = {} } } }, "series[1].values must be a non-empty list")
    bad({ series = { { name = "a", values = { 1, "x" } } } },
      "series[1].values[2] must be a finite number, got x")
    bad({ series = { { name = "a", values = { 1, 1 / 0 } } } }, "values[2] must be a finite number")
    bad({ series = { { name = "a", values = { 1, 2 }, x = { 1 } } } },
      "series[1].x has 1 numbers but values has 2")
    bad({ series = { { name = "a", values = { 1 }, colour = "red" } } },
      "series[1]: unknown option 'colour'")
    bad({ series = { { name = "a", values = { 1 } } }, nope = 1 }, "unknown option 'nope'")
    bad({ series = { { name = "a", values = { 1 } } }, width = 10 }, "width must be an integer >= 160")
    bad({ panels = { { series = { { name = "a", values = { 1 } } } }, 3 } },
      "panels[2] must be a table, got number")
    bad({ panels = { { series = { { name = "a", values = { 1 } } } } },
      series = { { name = "a", values = { 1 } } } }, "not both")
    bad({ panels = { { title = "t" } } }, "panels[1].series must be a non-empty list")
  end)
end)
