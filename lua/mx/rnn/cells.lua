-- mx.rnn's modifier, bidirectional and fused cells (MXNet 1.x's python/mxnet/rnn/rnn_cell.py),
-- installed into mx.rnn by lua/mx/rnn/init.lua:
--
--   ModifierCell(base_cell)                  the base class of the two below
--   ZoneoutCell(base_cell, zoneout_outputs=0, zoneout_states=0)
--   ResidualCell(base_cell)                  output + input (elemwise_add, <out>_plus_residual)
--   BidirectionalCell(l_cell, r_cell, params, output_prefix="bi_")
--   FusedRNNCell(num_hidden, num_layers=1, mode="lstm", bidirectional=false, dropout=0,
--                get_next_state=false, forget_bias=1, prefix="<mode>_", params)
--     one RNN op over the sequence (its packed `parameters` variable, initialised by
--     mx.init.FusedRNN); unfuse() gives the equivalent stack of cells (names <prefix>l0_...).
-- As MXNet's: after a modifier wraps a cell the base cell is not called directly; a
-- BidirectionalCell and a FusedRNNCell only unroll (no step).
local class = require("mx.core.class")

local type, error, tostring, ipairs, pairs, setmetatable = type, error, tostring, ipairs, pairs,
  setmetatable

return function(M)
  local BaseRNNCell = M.BaseRNNCell
  local base_init, normalize, UNROLL, cell_class = M._base_init, M._normalize, M._UNROLL,
    M._cell_class
  local function S() return require("mx.symbol") end

  local function ctor(cls, params, fn)
    local sig = class.declare(cls, class.signature(cls.__name, params))
    setmetatable(cls, { __index = BaseRNNCell, __call = function(_, ...) return fn(sig(2, ...)) end })
  end

  ---------------------------------------------------------------- ModifierCell
  local ModifierCell = cell_class("ModifierCell")
  local function modifier_init(self, base)
    if type(base) ~= "table" or type(base.state_info) ~= "function" then
      error(tostring(self.__name or "ModifierCell") .. ": base_cell must be an mx.rnn cell", 4)
    end
    base_init(self, "", nil)
    base._modified = true
    self.base_cell = base
    return self
  end
  ctor(ModifierCell, { "base_cell" }, function(o)
    return modifier_init(setmetatable({}, ModifierCell), o.base_cell)
  end)
  function ModifierCell:params()
    self._own_params = false
    return self.base_cell:params()
  end
  function ModifierCell:state_info() return self.base_cell:state_info() end
  function ModifierCell:begin_state(...)
    if self._modified then
      error("ModifierCell: after a modifier cell the base cell cannot be called directly", 2)
    end
    self.base_cell._modified = false
    local b = self.base_cell:begin_state(...)
    self.base_cell._modified = true
    return b
  end
  function ModifierCell:reset()
    BaseRNNCell.reset(self)
    if self.base_cell then self.base_cell:reset() end
  end

  ---------------------------------------------------------------- ZoneoutCell
  local ZoneoutCell = cell_class("ZoneoutCell")
  ctor(ZoneoutCell, { "base_cell", "zoneout_outputs", "zoneout_states" }, function(o)
    local b = o.base_cell
    local mt = type(b) == "table" and getmetatable(b)
    if mt == M.FusedRNNCell or mt == M.BidirectionalCell then
      error("ZoneoutCell: " .. getmetatable(b).__name .. " does not step; wrap the cells underneath "
        .. "(FusedRNNCell: unfuse first)", 3)
    end
    local self = modifier_init(setmetatable({}, ZoneoutCell), b)
    self.zoneout_outputs, self.zoneout_states = o.zoneout_outputs or 0, o.zoneout_states or 0
    self.prev_output = nil
    return self
  end)
  setmetatable(ZoneoutCell, { __index = ModifierCell, __call = getmetatable(ZoneoutCell).__call })
  function ZoneoutCell:reset()
    ModifierCell.reset(self)
    self.prev_output = nil
  end
  function ZoneoutCell:step(inputs, states)
    local sym = S()
    local po, ps = self.zoneout_outputs, self.zoneout_states
    local next_output, next_states = self.base_cell(inputs, states)
    local function mask(p, like) return sym.Dropout(sym.ones_like(like), { p = p }) end
    local prev = self.prev_output or sym.zeros_like(next_output) -- (MXNet: zeros((0, 0)))
    local output = po ~= 0 and sym.where(mask(po, next_output), next_output, prev) or next_output
    local new_states = next_states
    if ps ~= 0 then
      new_states = {}
      for i, s in ipairs(next_states) do new_states[i] = sym.where(mask(ps, s), s, states[i]) end
    end
    self.prev_output = output
    return output, new_states
  end

  ---------------------------------------------------------------- ResidualCell
  local ResidualCell = cell_class("ResidualCell")
  ctor(ResidualCell, { "base_cell" }, function(o)
    return modifier_init(setmetatable({}, ResidualCell), o.base_cell)
  end)
  setmetatable(ResidualCell, { __index = ModifierCell, __call = getmetatable(ResidualCell).__call })
  local function plus_residual(out, x)
    return S().elemwise_add(out, x, { name = out:name() .. "_plus_residual" })
  end
  function ResidualCell:step(inputs, states)
    local out, st = self.base_cell(inputs, states)
    return plus_residual(out, inputs), st
  end
  function ResidualCell:unroll(...)
    local o = UNROLL(2, ...)
    self:reset()
    self.base_cell._modified = false
    local outputs, states = self.base_cell:unroll(o.length, o.inputs, o.begin_state, o.layout,
      o.merge_outputs)
    self.base_cell._modified = true
    local merge = o.merge_outputs
    if merge == nil then merge = S().is_symbol(outputs) end
    local inputs = normalize(o.length, o.inputs, o.layout or "NTC", merge)
    if merge then return plus_residual(outputs, inputs), states end
    local r = {}
    for t, out in ipairs(outputs) do r[t] = plus_residual(out, inputs[t]) end
    return r, states
  end

  ---------------------------------------------------------------- BidirectionalCell
  local BidirectionalCell = cell_class("BidirectionalCell")
  ctor(BidirectionalCell, { "l_cell", "r_cell", "params", "output_prefix" }, function(o)
    local self = base_init(setmetatable({}, BidirectionalCell), "", o.params)
    self._output_prefix = o.output_prefix or "bi_"
    self._override_cell_params = o.params ~= nil
    for _, c in ipairs { o.l_cell, o.r_cell } do
      if type(c) ~= "table" or type(c.state_info) ~= "function" then
        error("BidirectionalCell: l_cell and r_cell must be mx.rnn cells", 3)
      end
    end
    if self._override_cell_params then
      for _, c in ipairs { o.l_cell, o.r_cell } do
        for k, v in pairs(self._params._params) do c:params()._params[k] = v end
      end
    end
    for _, c in ipairs { o.l_cell, o.r_cell } do
      for k, v in pairs(c:params()._params) do self._params._params[k] = v end
    end
    self._cells = { o.l_cell, o.r_cell }
    return self
  end)
  function BidirectionalCell.step()
    error("BidirectionalCell cannot be stepped; use unroll", 2)
  end
  function BidirectionalCell:state_info()
    local r = {}
    for _, c in ipairs(self._cells) do for _, i in ipairs(c:state_info()) do r[#r + 1] = i end end
    return r
  end
  function BidirectionalCell:begin_state(...)
    if self._modified then
      error("BidirectionalCell: after a modifier cell the base cell cannot be called directly", 2)
    end
    local r = {}
    for _, c in ipairs(self._cells) do for _, s in ipairs(c:begin_state(...)) do r[#r + 1] = s end end
    return r
  end
  function BidirectionalCell:unroll(...)
    local o = UNROLL(2, ...)
    local sym = S()
    self:reset()
    local layout = o.layout or "NTC"
    local inputs, axis = normalize(o.length, o.inputs, layout, false)
    local states = o.begin_state or self:begin_state()
    local l, r = self._cells[1], self._cells[2]
    local nl = #l:state_info()
    local ls, rs = {}, {}
    for i, s in ipairs(states) do if i <= nl then ls[#ls + 1] = s else rs[#rs + 1] = s end end
    local rev = {}
    for t = 1, o.length do rev[t] = inputs[o.length + 1 - t] end
    local lo, lst = l:unroll(o.length, inputs, ls, layout, o.merge_outputs)
    local ro, rst = r:unroll(o.length, rev, rs, layout, o.merge_outputs)
    local merge = o.merge_outputs
    local function split(x)
      local parts = sym.SliceChannel(x, { axis = axis, num_outputs = o.length, squeeze_axis = true })
      local list = {}
      for t = 1, o.length do list[t] = parts[t] end
      return list
    end
    if merge == nil then
      merge = sym.is_symbol(lo) and sym.is_symbol(ro)
      if not merge then
        if sym.is_symbol(lo) then lo = split(lo) end
        if sym.is_symbol(ro) then ro = split(ro) end
      end
    end
    local louts, routs
    if merge then
      louts, routs = { lo }, { sym.reverse(ro, { axis = axis }) }
    else
      louts, routs = lo, {}
      for t = 1, #ro do routs[t] = ro[#ro + 1 - t] end
    end
    local outputs = {}
    for i = 1, #louts do
      local name = merge and (self._output_prefix .. "out")
        or string.format("%st%d", self._output_prefix, i - 1)
      outputs[i] = sym.Concat(louts[i], routs[i], { dim = merge and 3 or 2, name = name })
    end
    if merge then outputs = outputs[1] end
    return outputs, { lst, rst }
  end

  ---------------------------------------------------------------- FusedRNNCell
  local FusedRNNCell = cell_class("FusedRNNCell")
  local MODES = { rnn_relu = 1, rnn_tanh = 1, lstm = 4, gru = 3 }
  ctor(FusedRNNCell, { "num_hidden", "num_layers", "mode", "bidirectional", "dropout",
    "get_next_state", "forget_bias", "prefix", "params" }, function(o)
    local mode = o.mode or "lstm"
    if not MODES[mode] then
      error("FusedRNNCell: mode must be rnn_relu, rnn_tanh, lstm or gru, got " .. tostring(mode), 3)
    end
    local self = base_init(setmetatable({}, FusedRNNCell), o.prefix or (mode .. "_"), o.params)
    self._num_hidden, self._num_layers, self._mode = o.num_hidden, o.num_layers or 1, mode
    self._bidirectional, self._dropout = o.bidirectional == true, o.dropout or 0
    self._get_next_state = o.get_next_state == true
    local init = require("mx.initializer").FusedRNN(nil, self._num_hidden, self._num_layers, mode,
      self._bidirectional, o.forget_bias or 1.0)
    self._parameter = self._params:get("parameters", { init = init })
    return self
  end)
  function FusedRNNCell:state_info()
    local b = self._bidirectional and 2 or 1
    local r = {}
    for i = 1, self._mode == "lstm" and 2 or 1 do
      r[i] = { shape = { b * self._num_layers, 0, self._num_hidden }, __layout__ = "LNC" }
    end
    return r
  end
  function FusedRNNCell.step()
    error("FusedRNNCell cannot be stepped; use unroll", 2)
  end
  function FusedRNNCell:unroll(...)
    local o = UNROLL(2, ...)
    local sym = S()
    self:reset()
    local layout = o.layout or "NTC"
    local inputs, axis = normalize(o.length, o.inputs, layout, true)
    if axis == 2 then inputs = sym.swapaxes(inputs, { dim1 = 1, dim2 = 2 }) end
    local states = o.begin_state or self:begin_state()
    local rnn = sym.RNN(inputs, self._parameter, states[1], self._mode == "lstm" and states[2] or nil,
      { state_size = self._num_hidden, num_layers = self._num_layers,
        bidirectional = self._bidirectional, p = self._dropout, state_outputs = self._get_next_state,
        mode = self._mode, name = self._prefix .. "rnn" })
    local outputs, out_states = rnn, {}
    if self._get_next_state then
      outputs = rnn[1]
      out_states = { rnn[2] }
      if self._mode == "lstm" then out_states[2] = rnn[3] end
      for _, s in ipairs(out_states) do s:_set_attr { __layout__ = "LNC" } end
    end
    if axis == 2 then outputs = sym.swapaxes(outputs, { dim1 = 1, dim2 = 2 }) end
    outputs = normalize(o.length, outputs, layout, o.merge_outputs)
    return outputs, out_states
  end
  function FusedRNNCell:unfuse()
    local stack = M.SequentialRNNCell()
    local nh = self._num_hidden
    local make = {
      rnn_relu = function(p) return M.RNNCell(nh, "relu", p) end,
      rnn_tanh = function(p) return M.RNNCell(nh, "tanh", p) end,
      lstm = function(p) return M.LSTMCell(nh, p) end,
      gru = function(p) return M.GRUCell(nh, p) end,
    }
    local cell = make[self._mode]
    for i = 0, self._num_layers - 1 do
      if self._bidirectional then
        stack:add(M.BidirectionalCell(cell(string.format("%sl%d_", self._prefix, i)),
          cell(string.format("%sr%d_", self._prefix, i)), nil,
          string.format("%sbi_l%d_", self._prefix, i)))
      else
        stack:add(cell(string.format("%sl%d_", self._prefix, i)))
      end
      if self._dropout > 0 and i ~= self._num_layers - 1 then
        stack:add(M.DropoutCell(self._dropout, string.format("%s_dropout%d_", self._prefix, i)))
      end
    end
    return stack
  end
end
