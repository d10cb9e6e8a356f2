-- bin/mx (the REPL launcher), mx.repl and mx.help, driven through stdin.
local lib = require("mx.core.lib")
local repl = require("mx.repl")
local mx = require("mx")

-- the build this spec runs against (its libmx), so bin/mx uses the same one
local build = lib.libpath:match("^(.*)/lib/mx/libmx%.so$")
local function abs(p) return p:sub(1, 1) == "/" and p or (os.getenv("PWD") .. "/" .. p) end

local function run_mx(input, args)
  local tmp = os.tmpname()
  local f = assert(io.open(tmp, "w"))
  f:write(input)
  f:close()
  local cmd = string.format("MX_BUILD_DIR='%s' bin/mx %s < '%s' 2>&1", abs(build), args or "", tmp)
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  p:close()
  os.remove(tmp)
  return out
end

-- Writes text to a temporary .lua file, calls fn(path), removes the file; returns what
-- fn returns.
local function with_lua_file(text, fn)
  local base = os.tmpname()
  local path = base .. ".lua"
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  local r1, r2 = fn(path)
  os.remove(path)
  os.remove(base)
  return r1, r2
end

local function sink()
  local s = { buf = {} }
  function s.write(self, ...) for _, v in ipairs { ... } do self.buf[#self.buf + 1] = v end end
  function s.flush() end
  function s.text(self) return table.concat(self.buf) end
  return s
end

local function session(lines)
  local i = 0
  local out = sink()
  repl.run {
    interactive = false, out = out,
    input = function() i = i + 1 return lines[i] end,
  }
  return out:text()
end

describe("bin/mx", function()
  it("prints each expression's value, tensors pretty-printed", function()
    local out = run_mx("x = nd.ones{2, 3}\nx * 2\n1 + 1\n")
    assert.equal("[[2. 2. 2.]\n [2. 2. 2.]]\n<NDArray 2x3 float32 @cpu(0)>\n2\n", out)
  end)

  it("keeps top-level locals, continues unfinished statements, reports errors", function()
    local out = run_mx(table.concat({
      "local y = 20",
      "y + 1",
      "for i = 1, 2 do",
      "  print(i * 10)",
      "end",
      "nd.ones{2} + nd.ones{3}",
      "x =",
      "'after'",
      "x",
    }, "\n") .. "\n")
    local lines = {}
    for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.equal("21", lines[1])
    assert.equal("10", lines[2])
    assert.equal("20", lines[3])
    assert.equal("stdin:1: add: shapes (2,) and (3,) cannot be broadcast together (axis 1: 2 vs 3)",
      lines[4])
    assert.equal("after", lines[5])
    assert.equal(5, #lines)
  end)

  it("mx.help shows an op's doc from the op table", function()
    local out = run_mx("mx.help(mx.nd.add)\nhelp('relu')\n")
    assert.truthy(out:find("mx.nd.add(lhs, rhs, {out=})", 1, true), out)
    assert.truthy(out:find("Elementwise lhs + rhs.", 1, true), out)
    assert.truthy(out:find("mx.nd.relu(data, {out=})", 1, true), out)
    assert.truthy(out:find("Elementwise max(x, 0).", 1, true), out)
  end)

  it("runs a script with the checkout's paths", function()
    local out = with_lua_file('local mx = require("mx") print(#mx.nd.ones{3}:tolist(), ...)\n',
      function(path) return run_mx("", "'" .. path .. "' a b") end)
    assert.equal("3\ta\tb\n", out)
  end)
end)

describe("mx.repl", function()
  it("summarises tables and quotes nested strings", function()
    assert.equal('{1, "a", k = {2}}', repl.repr { 1, "a", k = { 2 } })
    assert.equal("hi", repl.repr("hi"))
    local t = {}
    t.self = t
    assert.equal("{self = <cycle>}", repl.repr(t))
  end)

  it("evaluates a session from any line source", function()
    local out = session { "a = 3", "a * 2", "=a", "local function sq(v) return v * v end", "sq(a)" }
    assert.equal("6\n3\n9\n", out)
  end)

  it("reports syntax errors and goes on", function()
    local out = session { "x = = 1", "2 + 2" }
    assert.truthy(out:find("^stdin:1: unexpected symbol near '='\n4\n$"), out)
  end)
end)

describe("mx.help", function()
  it("documents ops by function, method and name", function()
    local a = mx.help.text(mx.nd.add)
    assert.equal(a, mx.help.text("add"))
    assert.equal(a, mx.help.text(mx.nd.ones { 1 }.add))
    assert.truthy(a:find("also:    method x:add(...); with a number: add_scalar; differentiable", 1, true), a)
    local z = mx.help.text("zeros")
    assert.truthy(z:find('dtype        dtype name, default "float32"', 1, true), z)
    -- the kernels this process has, the declared but absent ones bracketed (no GPU here:
    -- libmx_cuda not loaded)
    assert.truthy(a:find("kernels: ref, cpu, [d%[]") and a:find("cuda%]?$"), a)
    assert.truthy(mx.help.text("arange"):find("kernels: ref$"))
  end)

  it("shows the comment above a Lua function, and a tensor's methods", function()
    local t, tmp = with_lua_file("local M = {}\n------------------------------ section\n"
      .. "-- Doubles v.\n-- (really)\nfunction M.double(v) return 2 * v end\nreturn M\n",
      function(path) return mx.help.text(dofile(path).double), path end)
    assert.equal("function M.double(v) return 2 * v end\n  (" .. tmp .. ":5)\n\n  Doubles v.\n  (really)", t)
    local x = mx.help.text(mx.nd.zeros { 2, 3 })
    assert.truthy(x:find("NDArray of shape (2, 3), float32, on cpu(0)", 1, true), x)
    assert.truthy(x:find("reshape", 1, true))
    assert.truthy(mx.help.text("no_such_op"):find('no op or mx.nd function named "no_such_op"', 1, true))
    assert.truthy(mx.help.text():find("^mx.help%(obj%) explains obj:"))
    local dl = mx.help.text(require("mx.gluon.data").DataLoader)
    assert.truthy(dl:find("^DataLoader  —  function DataLoader.new%(%.%.%.%)"), dl)
    assert.truthy(dl:find("DataLoader(dataset, batch_size=, shuffle=false", 1, true), dl)
  end)
end)
