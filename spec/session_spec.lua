-- spec/session_spec.lua — sessions (mx.h "sessions"; docs/embedding.md): two Lua states
-- on two OS threads in one process (tools/hosts/two_states, built by CMake) train the
-- same MLP as a single state does, bitwise; one state's memory never forces another's
-- collections; N states never hold more kernel threads than the budget; a tensor passes
-- from one state to another without a copy. And mx.session within one state.
local mx = require("mx")

local function host_output()
  local bin = "build/two_states"
  local f = io.open(bin, "rb")
  assert(f, bin .. " is missing: build with cmake (the two_states target)")
  f:close()
  -- the paths .busted gives this process, so the host's states load this checkout
  local cmd = string.format("LUA_PATH=%q LUA_CPATH=%q MX_NUM_THREADS=4 %s tools/hosts/mlp.lua 2>&1",
    package.path, package.cpath, bin)
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  local ok = p:close()
  return out, ok
end

describe("several Lua states in one process", function()
  local out, ok = host_output()
  local res = {}
  for tag, loss, sum, gc in out:gmatch("result (%S+) loss=(%S+) checksum=(%S+) gc=(%d+)") do
    res[tag] = { loss = loss, sum = sum, gc = tonumber(gc) }
  end

  it("the host ran every phase", function()
    assert.truthy(ok, out)
    assert.truthy(out:find("\ndone\n", 1, true), out)
    for _, tag in ipairs({ "single", "pair_a", "pair_b", "quiet" }) do
      assert.truthy(res[tag], "no result for " .. tag .. ":\n" .. out)
    end
  end)

  it("two states training at once give the single state's loss and weights, bitwise", function()
    for _, tag in ipairs({ "pair_a", "pair_b", "quiet" }) do
      assert.are.equal(res.single.loss, res[tag].loss, tag)
      assert.are.equal(res.single.sum, res[tag].sum, tag)
    end
    -- the loss is a real number that training moved below chance (ln 3 = 1.0986)
    local l = tonumber(res.single.loss)
    assert.truthy(l and l > 0 and l < 1.05, res.single.loss)
  end)

  it("a state's GC is stepped by its own memory only", function()
    local held, noise_gc = out:match("noise held=(%d+) bytes=(%d+) gc=(%d+)")
    assert.truthy(held, out)
    local bytes, ngc = tonumber(select(2, out:match("noise held=(%d+) bytes=(%d+)"))),
      tonumber(noise_gc)
    assert.truthy(bytes >= 48 * 4 * 2 ^ 20, "the noise state held " .. bytes .. " bytes")
    assert.truthy(ngc > 0, "the noise state's churn never collected")
    -- the training state's own temporaries collect (the counter works) ...
    assert.truthy(res.single.gc > 0)
    -- ... and ~200 MB live in another state add nothing (a process-wide counter would
    -- collect on nearly every new tensor: thousands). Slack of 2: collections depend
    -- on when queued ops drop their tensors.
    assert.truthy(res.quiet.gc <= res.single.gc + 2,
      string.format("quiet state: %d collections, alone: %d", res.quiet.gc, res.single.gc))
  end)

  it("two states running big ops at once never hold more threads than the budget", function()
    local budget, peak, sampled = out:match("threads budget=(%d+) peak=(%d+) sampled_max=(%d+)")
    assert.truthy(budget, out)
    budget, peak, sampled = tonumber(budget), tonumber(peak), tonumber(sampled)
    assert.are.equal(4, budget)
    assert.truthy(peak >= 2, "no kernel ever took a team (peak " .. peak .. ")")
    assert.truthy(peak <= budget, "peak " .. peak .. " > budget " .. budget)
    assert.truthy(sampled <= budget, "sampled " .. sampled .. " > budget " .. budget)
  end)

  it("a tensor handed to another state keeps its memory (no copy) and its values", function()
    local same_ptr, same_sum, charged, left =
      out:match("handover same_ptr=(%S+) same_sum=(%S+) charged=(%d+) exporter_left=(%d+)")
    assert.truthy(same_ptr, out)
    assert.are.equal("true", same_ptr)
    assert.are.equal("true", same_sum)
    -- the exporter's session held the 256x256 f32 tensor; importing moved it over
    assert.truthy(tonumber(left) >= 256 * 256 * 4, left)
    assert.truthy(tonumber(charged) >= 256 * 256 * 4, charged)
  end)

  it("a handle imported once cannot be imported again by another state; a made-up one is refused", function()
    local ok1, err, ok2, err2 = out:match("reimport ok=(%S+) err=(.-) | bogus ok=(%S+) err=([^\n]*)")
    assert.truthy(ok1, out)
    assert.are.equal("false", ok1)
    assert.truthy(err:find("mx.session.import: ", 1, true) and err:find("is not a live export", 1, true), err)
    assert.are.equal("false", ok2)
    assert.truthy(err2:find("is not a live export", 1, true), err2)
  end)

  it("two states adding in place to one handed-over tensor lose no update", function()
    local total, expected = out:match("shared total=(%d+) expected=(%d+)")
    assert.truthy(total, out)
    assert.are.equal(expected, total)
  end)
end)

describe("mx.session in one state", function()
  it("export then import is the same tensor, reference counted", function()
    local x = mx.nd.array({ 1, 2, 3 })
    local h = mx.session.export(x)
    assert.are.equal("number", type(h))
    local y = mx.session.import(h)
    assert.are.equal(tostring(x:data_ptr()), tostring(y:data_ptr()))
    x = nil -- luacheck: ignore 311
    collectgarbage("collect")
    mx.nd._sweep()
    assert.are.same({ 1, 2, 3 }, y:totable())
  end)

  it("bad arguments are clear errors blaming the caller", function()
    assert.has_error(function() mx.session.export(3) end,
      "mx.session.export: expected an NDArray, got number")
    local ok, err = pcall(mx.session.import, "x")
    assert.is_false(ok)
    assert.truthy(err:find("expected a handle from mx.session.export", 1, true), err)
    for _, bad in ipairs({ 0, -1, 1.5, 0 / 0, 2 ^ 53, math.huge }) do
      ok, err = pcall(mx.session.import, bad)
      assert.is_false(ok)
      assert.truthy(err:find("expected a handle from mx.session.export", 1, true), err)
    end
    local x = mx.nd.ones({ 2 })
    for _, o in ipairs({ { imports = 0 }, { imports = 1.5 }, { imports = "2" }, { shared = true } }) do
      ok, err = pcall(function() local r = mx.session.export(x, o); return r end)
      assert.is_false(ok)
      assert.truthy(err:find("^[^\n]*session_spec.lua:%d+: mx.session.export: "), err)
    end
  end)

  it("a handle is imported as many times as exported, then refused; revoke drops the rest", function()
    local x = mx.nd.array({ 4, 5 })
    local h = mx.session.export(x)
    assert.are.equal(1, mx.session.imports_left(h))
    local y = mx.session.import(h)
    assert.are.same({ 4, 5 }, y:totable())
    assert.are.equal(0, mx.session.imports_left(h))
    local ok, err = pcall(function() local r = mx.session.import(h); return r end)
    assert.is_false(ok)
    assert.truthy(err:find("session_spec.lua:%d+: mx.session.import: %d+ is not a live export"), err)
    local h3 = mx.session.export(x, { imports = 3 })
    local a, b = mx.session.import(h3), mx.session.import(h3)
    assert.are.same(a:totable(), b:totable())
    mx.session.revoke(h3)
    assert.is_false((pcall(mx.session.import, h3)))
    ok, err = pcall(mx.session.revoke, h3)
    assert.is_false(ok)
    assert.truthy(err:find("mx.session.revoke: %d+ is not a live export"), err)
  end)

  it("numbers that were never exported name nothing: a tensor's address, small integers", function()
    local x = mx.nd.ones({ 3 })
    local addr = tonumber(require("ffi").cast("uintptr_t", x.h))
    for _, n in ipairs({ addr, 1, 2, 42, 2 ^ 52 }) do
      local ok, err = pcall(mx.session.import, n)
      assert.is_false(ok)
      assert.truthy(err:find("is not a live export", 1, true), err)
    end
    assert.are.same({ 1, 1, 1 }, x:totable())
  end)

  it("bytes_in_use counts this state's tensors", function()
    local b0 = mx.session.bytes_in_use()
    local t = mx.nd.zeros({ 1024, 256 })
    assert.truthy(mx.session.bytes_in_use() - b0 >= 1024 * 256 * 4)
    assert.truthy(t)
  end)
end)
