-- Recurrent nets through export / SymbolBlock (gluon/_export.lua): hybridized gluon.rnn
-- LSTM / GRU nets exported by real MXNet 1.9.1 (spec/fixtures/export_lstm*, export_gru*,
-- made by tools/fixtures/make_lstm_export_fixture.py) run here to MXNet's outputs and
-- fine-tune; luamx's own exports of them load back here and are the very files MXNet
-- 1.9.1 loaded and ran (spec/fixtures/export_lstm_check.lua, tools/fixtures/
-- check_lstm_export.py). The files hold what the importer must read: _rnn_param_concat
-- (Concat under MXNet's name), _zeros begin states of shape (L*D, 0, H) whose 0 the
-- graph's inference fills from the data, RNN attributes "None".
local mx = require("mx")
local nd, autograd, gluon = mx.nd, mx.autograd, mx.gluon
local SymbolBlock = gluon.SymbolBlock

local FIX = "spec/fixtures/"
local tmp = os.tmpname()
os.remove(tmp)

local function maxdiff(a, b)
  assert.same(a:shape(), b:shape())
  return (a - b):abs():max():item()
end

local function imported(name)
  local f = FIX .. "export_" .. name
  return SymbolBlock.imports(f .. "-symbol.json", { "data" }, f .. "-0000.params"),
    nd.load(f .. "_io.params")
end

describe("gluon export of recurrent nets", function()
  after_each(function()
    for _, f in ipairs { "-symbol.json", "-0000.params" } do os.remove(tmp .. f) end
  end)

  for _, name in ipairs { "lstm", "gru" } do
    it("runs MXNet 1.9.1's exported " .. name .. " to its outputs, eager and hybridized", function()
      local blk, io = imported(name)
      assert.is_true(maxdiff(blk(io.x), io.y) <= 1e-5)
      -- another batch size: the begin states' 0 follows the data
      local x2 = io.x:slice_axis({ axis = 2, begin = 1, ["end"] = 2 })
      local y2 = blk(x2)
      assert.same({ 5, 2, io.y:shape()[3] }, y2:shape())
      assert.is_true(maxdiff(y2, io.y:slice_axis({ axis = 2, begin = 1, ["end"] = 2 })) <= 1e-5)
      blk:hybridize()
      assert.is_true(maxdiff(blk(io.x), io.y) <= 1e-5)
      assert.is_true(maxdiff(blk(x2), y2) <= 1e-6)
    end)
  end

  it("reads _rnn_param_concat, _zeros with a 0 dim and RNN's \"None\" attributes", function()
    local s = mx.sym.load(FIX .. "export_lstm-symbol.json")
    local seen = {}
    for _, n in ipairs(s:_topo()) do
      if n.op then seen[n.op.name] = (seen[n.op.name] or 0) + 1 end
      if n.op and n.op.name == "rnn" then
        assert.is_nil(n.opts.lstm_state_clip_min) -- "None": not given
        assert.is_nil(n.opts.projection_size)
        assert.equal("lstm", n.opts.mode)
      end
    end
    assert.equal(1, seen.concat) -- _rnn_param_concat
    assert.equal(2, seen.zeros)
    -- the 0 is unknown until the data is known, then the RNN's state input decides it
    local internals = s:get_internals()
    local names = internals:list_outputs()
    local _, outs = internals:infer_shape_partial({ data = { 5, 7, 4 } })
    local found = 0
    for i, nm in ipairs(names) do
      if nm:match("_h0_%d_output$") then
        assert.same({ 4, 7, 8 }, outs[i])
        found = found + 1
      end
    end
    assert.equal(2, found)
    local _, o = s:infer_shape_partial({ data = { 5, 7, 4 } })
    assert.same({ 5, 7, 3 }, o[1])
    -- written back as MXNet's 0
    local js = s:tojson()
    local _, zeros = js:gsub('"op":"_zeros"[^}]-"shape":"%(4, 0, 8%)"', "")
    assert.equal(2, zeros)
    -- an optional float attribute that is neither a number nor None: the attribute named
    local raw = assert(io.open(FIX .. "export_lstm-symbol.json")):read("*a")
    local bad, k = raw:gsub('"lstm_state_clip_min": "None"', '"lstm_state_clip_min": "small"')
    assert.equal(1, k)
    local ok, err = pcall(mx.sym.fromjson, bad)
    assert.is_false(ok)
    assert.matches("lstm_state_clip_min", tostring(err), 1, true)
  end)

  it("runs MXNet's LSTM symbol file through mx.sym's eval and bind, any batch size", function()
    local s = mx.sym.load(FIX .. "export_lstm-symbol.json")
    local io = nd.load(FIX .. "export_lstm_io.params")
    local args = {}
    for k, v in pairs(nd.load(FIX .. "export_lstm-0000.params")) do args[k:sub(5)] = v end
    args.data = io.x
    assert.is_true(maxdiff(s:eval(mx.cpu(), args)[1], io.y) <= 1e-5)
    local ex = s:bind(mx.cpu(), args)
    ex:forward()
    assert.is_true(maxdiff(ex.outputs[1], io.y) <= 1e-5)
    args.data = io.x:slice_axis({ axis = 2, begin = 2, ["end"] = 3 })
    assert.is_true(maxdiff(s:eval(mx.cpu(), args)[1],
      io.y:slice_axis({ axis = 2, begin = 2, ["end"] = 3 })) <= 1e-5)
    -- a 0 no consumer decides: an error naming the node, not an empty array
    local z = mx.sym.load(FIX .. "export_lstm-symbol.json"):get_internals()
    local h0
    for i, nm in ipairs(z:list_outputs()) do if nm:match("_h0_0_output$") then h0 = z[i] end end
    assert.has_error(function() h0:eval(mx.cpu(), {}) end,
      "symbol: the shape of 'hybridsequential0_lstm0_h0_0' (zeros, dim 2 unknown) could not be "
        .. "inferred from the inputs")
  end)

  it("keeps eager zeros of a 0 dim a real empty array, negative dims an error", function()
    local z = nd.zeros({ 2, 0, 3 })
    assert.same({ 2, 0, 3 }, z:shape())
    assert.equal(0, z:size())
    assert.has_error(function() nd.zeros({ 2, -1 }) end)
  end)

  for _, name in ipairs { "lstm", "gru" } do
    it("fine-tunes MXNet's exported " .. name .. " (gradients reach the recurrent params)", function()
      local blk, io = imported(name)
      blk:hybridize()
      local params = blk:collect_params()
      local trainer = gluon.Trainer(params, "sgd", { learning_rate = 0.5 })
      local target = io.y * 0
      local losses = {}
      for step = 1, 5 do
        local loss
        autograd.record(function() loss = (blk(io.x) - target):square():mean() end)
        loss:backward()
        if step == 1 then
          local reached = 0
          for _, k in ipairs(params:keys()) do
            if k:match("i2h_weight$") or k:match("h2h_bias$") then
              assert.is_true(params:get(k):grad():abs():sum():item() > 0, k)
              reached = reached + 1
            end
          end
          assert.is_true(reached >= 2)
        end
        trainer:step(1)
        losses[step] = loss:item()
      end
      for step = 2, 5 do assert.is_true(losses[step] < losses[step - 1]) end
      assert.is_true(losses[5] < 0.7 * losses[1])
    end)
  end

  it("exports our hybridized LSTM / GRU nets: they load back here, any batch size", function()
    local nets = dofile("tools/fixtures/export_lstm_nets.lua").build(mx)
    for _, name in ipairs { "lstm", "gru" } do
      local e = nets[name]
      local sf, pf = e.net:export(tmp)
      local x2 = nd.random.uniform(-1, 1, { 4, 6, 4 })
      local y2 = e.net(x2)
      local blk = SymbolBlock.imports(sf, { "data" }, pf)
      assert.is_true(maxdiff(blk(e.x), e.y) <= 1e-6)
      assert.is_true(maxdiff(blk(x2), y2) <= 1e-6)
      blk:hybridize()
      assert.is_true(maxdiff(blk(e.x), e.y) <= 1e-6)
      assert.is_true(maxdiff(blk(x2), y2) <= 1e-6)
    end
  end)

  it("writes the very files MXNet 1.9.1 loaded and ran to our outputs", function()
    local verdict = dofile(FIX .. "export_lstm_check.lua")
    local nets = dofile("tools/fixtures/export_lstm_nets.lua").build(mx)
    local n = 0
    for name, e in pairs(nets) do
      local v = verdict.nets[name]
      assert.is_not_nil(v, name)
      assert.is_true(v.ok)
      assert.is_true(v.imports <= 1e-5)
      local sf, pf = e.net:export(tmp)
      local f = assert(io.open(sf))
      local js = f:read("*a")
      f:close()
      -- the export record names the temporary file this run wrote: compared without it
      local function unrecorded(t) return (t:gsub('"luamx_params":%[[^%]]*%],', "")) end
      assert.truthy(v.json:find('"luamx_params"', 1, true)) -- MXNet loaded files with it
      -- (rerun check_lstm_export.py when the export changes on purpose)
      assert.equal(unrecorded(v.json), unrecorded(js))
      assert.matches('"shape":"(' .. (name == "lstm" and 4 or 1) .. ', 0, ', js, 1, true)
      local keys = {}
      for k in pairs(nd.load(pf)) do keys[#keys + 1] = k end
      table.sort(keys)
      assert.same(v.params, keys)
      n = n + 1
    end
    assert.equal(2, n)
  end)
end)
