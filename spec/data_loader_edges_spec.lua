-- DataLoader at its edges (gluon/data/dataloader.lua): interleaved iterators (each iter()
-- is a pass of its own, MXNet's behaviour, with and without workers), a worker that calls
-- os.exit or raises a non-string, the num_workers limit, and sampler indices that are not
-- whole numbers in range.
local mx = require("mx")
local data = require("mx.gluon.data")
local nd = mx.nd
local DL = data.DataLoader

local function rows(n) return data.ArrayDataset(nd.arange(0, n):reshape({ n, 1 })) end
local function first(t) return t:reshape({ -1 }):tolist()[1] end

describe("DataLoader: two iterators at once", function()
  for _, nw in ipairs({ 0, 1, 2 }) do
    it("each iter() gives its own whole pass, interleaved (num_workers = " .. nw .. ")", function()
      local dl = DL(rows(40), { batch_size = 4, num_workers = nw, timeout = 10 })
      local a, b = dl:iter(), dl:iter()
      local got = {}
      for k = 1, 10 do
        -- zip: one from each, then a third iterator started mid-way
        got[#got + 1] = { first(a()), first(b()) }
        if k == 5 then
          local c = dl:iter()
          assert.are.equal(0, first(c()))
          assert.are.equal(4, first(c()))
        end
      end
      for k = 1, 10 do assert.are.same({ 4 * (k - 1), 4 * (k - 1) }, got[k]) end
      assert.is_nil(a())
      assert.is_nil(b())
      dl:close()
    end)
  end

  it("random interleavings of iterators, some dropped mid-pass: every pass in order, no wait", function()
    math.randomseed(7)
    local dl = DL(rows(64), { batch_size = 4, num_workers = 2, prefetch = 2, timeout = 10 })
    local its, pos = {}, {}
    local t0 = os.time()
    for _ = 1, 300 do
      local r = math.random()
      if #its == 0 or r < 0.1 then
        its[#its + 1], pos[#its + 1] = dl:iter(), 0
      elseif r < 0.13 then
        table.remove(its, 1)
        table.remove(pos, 1)
        collectgarbage()
      else
        local k = math.random(#its)
        local v = its[k]()
        if v == nil then
          assert.are.equal(16, pos[k])
        else
          assert.are.equal(4 * pos[k], first(v))
          pos[k] = pos[k] + 1
        end
      end
    end
    assert.is_true(os.time() - t0 < 20)
    dl:close()
  end)

  it("a closed loader's iterator says so", function()
    local dl = DL(rows(8), { batch_size = 2, num_workers = 1 })
    local a = dl:iter()
    a()
    dl:close()
    local ok, err = pcall(function() local v = a(); return v end)
    assert.is_false(ok)
    assert.truthy(err:find("data_loader_edges_spec.lua:%d+: DataLoader: this pass is over "
      .. "%(the loader was closed%)"), err)
  end)
end)

describe("DataLoader workers that misbehave", function()
  it("os.exit in a worker raises there; the loader reports it and the process goes on", function()
    local ds = data.SimpleDataset({ 1, 2, 3, 4, 5, 6 }):transform(function(x)
      if x == 5 then os.exit(3) end
      return nd.array({ x })
    end)
    local dl = DL(ds, { batch_size = 2, num_workers = 2, timeout = 10 })
    local seen = {}
    local ok, err = pcall(function() for x in dl:iter() do seen[#seen + 1] = first(x) end end)
    assert.is_false(ok)
    assert.are.same({ 1, 3 }, seen)
    assert.truthy(err:find("DataLoader: worker 1 failed on batch 3 (sample indices 5, 6)", 1, true), err)
    assert.truthy(err:find("os.exit(3) called in a DataLoader worker", 1, true), err)
    dl:close()
  end)

  it("a worker raising a table, or os.exit while rebuilding, gives a message", function()
    local ds = data.SimpleDataset({ 1, 2 }):transform(function() error({ code = 1 }) end)
    local ok, err = pcall(function() for _ in DL(ds, { batch_size = 1, num_workers = 1 }):iter() do end end)
    assert.is_false(ok)
    assert.truthy(err:find("a table was raised as the error (no message)", 1, true), err)
    local ds2 = data.SimpleDataset({ 1, 2 }):transform(function() error({ msg = "bad sample" }) end)
    ok, err = pcall(function() for _ in DL(ds2, { batch_size = 1, num_workers = 1 }):iter() do end end)
    assert.is_false(ok)
    assert.truthy(err:find("bad sample", 1, true), err)
  end)
end)

describe("DataLoader limits", function()
  it("num_workers above 4 per core (at least 16) is a clear error at the caller's line", function()
    local cap = DL.max_workers()
    assert.is_true(cap >= 16)
    for _, n in ipairs({ cap + 1, 1e6 }) do
      local ok, err = pcall(function()
        local l = DL(rows(4), { batch_size = 1, num_workers = n })
        return l
      end)
      assert.is_false(ok)
      assert.truthy(err:find("data_loader_edges_spec.lua:%d+: DataLoader: num_workers = %d+ is above "
        .. "the limit of " .. cap), err)
    end
    local ok = pcall(DL, rows(4), { batch_size = 1, num_workers = cap })
    assert.is_true(ok)
  end)

  local function sampler_of(list)
    return { iter = function()
      local k = 0
      return function() k = k + 1; return list[k] end
    end, len = function() return #list end }
  end
  for _, nw in ipairs({ 0, 2 }) do
    for _, bad in ipairs({ 1.5, 0 / 0, 0, 9, -1, "2" }) do
      it("a sampler index " .. tostring(bad) .. " is refused before any row is read (num_workers = "
        .. nw .. ")", function()
        local dl = DL(rows(8), { batch_sampler = sampler_of({ { 1, 2 }, { 3, bad } }), num_workers = nw })
        local it = dl:iter()
        assert.are.equal(0, first(it()))
        local ok, err = pcall(function() local v = it(); return v end)
        assert.is_false(ok)
        assert.truthy(err:find("DataLoader: the sampler gave index " .. tostring(bad) .. " at position 2 "
          .. "of batch 2; indices are whole numbers in 1..8", 1, true), err)
        dl:close()
      end)
    end
  end

  it("gather refuses a non-integer row (it would read across rows)", function()
    local ok, err = pcall(data.batchify.gather, nd.arange(0, 6):reshape({ 3, 2 }), { 1, 1.5 }, 2)
    assert.is_false(ok)
    assert.truthy(err:find("gather: index 1.5 is not a whole number in 1..3", 1, true), err)
  end)
end)
