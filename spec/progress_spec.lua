-- mx.progress: the training progress bar.
local progress = require("mx.progress")

local function sink()
  local s = { buf = {} }
  function s.write(self, ...)
    for _, v in ipairs { ... } do self.buf[#self.buf + 1] = v end
  end
  function s.flush() end
  function s.text(self) return table.concat(self.buf) end
  return s
end

local function fake_clock(t0)
  local c = { t = t0 or 100 }
  return c, function() return c.t end
end

describe("mx.progress", function()
  it("formats times and rates", function()
    assert.equal("0:05", progress.format_time(4.6))
    assert.equal("1:15", progress.format_time(75))
    assert.equal("1:02:05", progress.format_time(3725))
    assert.equal("?", progress.format_time(0 / 0))
    assert.equal("12.3k", progress.format_rate(12345))
    assert.equal("1.50M", progress.format_rate(1.5e6))
    assert.equal("950.0", progress.format_rate(950))
  end)

  it("writes one clean line per finish() when not on a terminal", function()
    local out = sink()
    local c, clock = fake_clock()
    local bar = progress.Bar { total = 4, title = "epoch 1/2", out = out, tty = false, clock = clock }
    for _ = 1, 4 do
      c.t = c.t + 0.5
      bar:update(1, { loss = 0.25, acc = 0.875 }, 64)
    end
    assert.equal("", out:text()) -- nothing while running
    c.t = c.t + 5 -- an evaluation between the last batch and finish() is not counted
    local line = bar:finish()
    assert.equal("epoch 1/2 4/4  loss 0.2500  acc 0.8750  128.0 samples/s  2.0s\n", out:text())
    assert.equal(line .. "\n", out:text())
    assert.falsy(out:text():find("\r", 1, true))
  end)

  it("redraws in place on a terminal, with the bar, i/N, values, samples/s and ETA", function()
    local out = sink()
    local c, clock = fake_clock()
    local bar = progress.Bar { total = 10, title = "epoch 3/5", out = out, tty = true, clock = clock,
      width = 100, interval = 0 }
    c.t = c.t + 1
    bar:update(1, { { "loss", 1.5 }, { "accuracy", 0.5 } }, 100)
    local first = out:text()
    assert.equal("\r", first:sub(1, 1))
    assert.truthy(first:find("epoch 3/5 [", 1, true), first)
    assert.truthy(first:find("1/10  loss 1.5000  accuracy 0.5000  100.0 samples/s  ETA 0:09", 1, true),
      first)
    assert.truthy(#first <= 100)
    for _ = 2, 10 do
      c.t = c.t + 1
      bar:update(1, { loss = 0.5 }, 100)
    end
    local text = out:text()
    assert.truthy(text:find("[" .. string.rep("=", 5), 1, true))
    assert.truthy(text:find("10/10  loss 0.5000", 1, true), text)
    bar:finish()
    text = out:text()
    assert.equal("\n", text:sub(-1))
    local last = text:match("\r([^\r]*)\n$")
    assert.truthy(last:find("^epoch 3/5 10/10  loss 0.5000  100.0 samples/s  10.0s"), last)
  end)

  it("throttles redraws to the interval", function()
    local out = sink()
    local c, clock = fake_clock()
    local bar = progress.Bar { total = 1000, out = out, tty = true, clock = clock, interval = 0.1 }
    for _ = 1, 100 do
      c.t = c.t + 0.01
      bar:update()
    end
    local draws = select(2, out:text():gsub("\r", ""))
    assert.truthy(draws >= 9 and draws <= 11, tostring(draws))
  end)

  it("knows whether stdout is a terminal", function()
    local f = assert(io.popen("luajit -e 'package.path=\"lua/?.lua;\"..package.path "
      .. "print(require(\"mx.progress\").isatty())' | cat"))
    local r = f:read("*a")
    f:close()
    assert.equal("false\n", r)
    assert.is_true(progress.now() > 0)
  end)

  it("rejects unknown options", function()
    assert.has_error(function() progress.Bar { totl = 3 } end, "Bar: unknown option 'totl'")
  end)
end)
