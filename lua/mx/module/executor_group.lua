-- The executors of a Module, one per device (MXNet's DataParallelExecutorGroup,
-- python/mxnet/module/executor_group.py): each bound to its slice of the batch along the
-- batch axis (work_load_list shares it out; even by default), the parameters' arrays
-- per device (the Module keeps them equal through the optimizer or a kvstore).
--
--   G.new(symbol, contexts, workload, data_shapes, label_shapes, param_names, for_training,
--         inputs_need_grad, shared_group, fixed_param_names, grad_req, state_names)
-- data_shapes / label_shapes: lists of DataDesc. A shared group (BucketingModule's default
-- bucket) lends its parameter and gradient arrays: the executors of every bucket train the
-- same values.
local nd = require("mx.nd")
local io_ = require("mx.io")

local type, error, tostring, ipairs, setmetatable, math_floor =
  type, error, tostring, ipairs, setmetatable, math.floor

local G = {}
G.__index = G
local slice_of

-- the batch's slices [a, b] (1-based, inclusive) for the workloads
local function slices(n, workload)
  local total = 0
  for _, w in ipairs(workload) do total = total + w end
  local r, start = {}, 1
  for i, w in ipairs(workload) do
    local len = i == #workload and n - start + 1 or math_floor(n * w / total + 0.5)
    if len < 1 then
      error(string.format("Module: a batch of %d cannot be split over %d devices", n, #workload), 0)
    end
    r[i] = { start, start + len - 1 }
    start = start + len
  end
  return r
end

local function sliced_shape(desc, sl)
  local s = {}
  for i, d in ipairs(desc.shape) do s[i] = d end
  local ax = io_.DataDesc.get_batch_axis(desc.layout)
  s[ax] = sl[2] - sl[1] + 1
  return s, ax
end

function G.new(sym, contexts, workload, data_shapes, label_shapes, param_names, for_training,
               inputs_need_grad, shared, fixed, grad_req, state_names)
  local self = setmetatable({ symbol = sym, contexts = contexts, workload = workload,
    param_names = param_names, for_training = for_training,
    inputs_need_grad = inputs_need_grad, fixed = fixed or {}, grad_req = grad_req or "write",
    state_names = state_names or {} }, G)
  self.arg_names = sym:list_arguments()
  self.aux_names = sym:list_auxiliary_states()
  self.output_names = sym:list_outputs()
  -- each output's batch axis: its node's __layout__ attribute (MXNet's output_layouts)
  self.output_axes = {}
  for i = 1, #self.output_names do
    self.output_axes[i] = io_.DataDesc.get_batch_axis(sym[i]:attr("__layout__"))
  end
  self:_bind(data_shapes, label_shapes, shared)
  return self
end

function G:_bind(data_shapes, label_shapes, shared)
  self.data_shapes, self.label_shapes = data_shapes, label_shapes or {}
  local n = data_shapes[1].shape[io_.DataDesc.get_batch_axis(data_shapes[1].layout)]
  self.batch_size = n
  self.slices = slices(n, self.workload)
  local is_param, is_data = {}, {}
  for _, p in ipairs(self.param_names) do is_param[p] = true end
  for _, d in ipairs(data_shapes) do is_data[d.name] = true end
  for _, d in ipairs(self.label_shapes) do is_data[d.name] = "label" end
  local fixed = {}
  for _, p in ipairs(self.fixed) do fixed[p] = true end
  self.execs = {}
  for k, ctx in ipairs(self.contexts) do
    local shapes = {}
    for _, d in ipairs(data_shapes) do shapes[d.name] = (sliced_shape(d, self.slices[k])) end
    for _, d in ipairs(self.label_shapes) do shapes[d.name] = (sliced_shape(d, self.slices[k])) end
    local arg_shapes, _, aux_shapes = self.symbol:infer_shape(shapes)
    if arg_shapes == nil then
      error("Module.bind: the data and label shapes do not determine every argument's shape "
        .. "(give the missing inputs' shapes)", 0)
    end
    local types = {}
    for _, d in ipairs(data_shapes) do types[d.name] = d.dtype end
    for _, d in ipairs(self.label_shapes) do types[d.name] = d.dtype end
    local args, grads, reqs, aux = {}, {}, {}, {}
    local sh = shared and shared.execs[k]
    for i, name in ipairs(self.arg_names) do
      local s = arg_shapes[i]
      local req = "null"
      if self.for_training then
        if is_param[name] then
          req = fixed[name] and "null" or self.grad_req
        elseif is_data[name] == true and self.inputs_need_grad then
          req = "write"
        end
      end
      reqs[name] = req
      if sh and is_param[name] and sh.arg_dict[name] then
        args[i] = sh.arg_dict[name]
        grads[name] = sh.grad_dict[name]
      else
        args[i] = nd.zeros(s, { ctx = ctx, dtype = types[name] })
      end
    end
    for i, name in ipairs(self.aux_names) do
      aux[i] = sh and sh.aux_dict[name] or nd.zeros(aux_shapes[i], { ctx = ctx })
    end
    local ok, e = pcall(self.symbol.bind, self.symbol, ctx, args,
      { args_grad = grads, grad_req = reqs, aux_states = aux })
    if not ok then error("Module.bind: " .. tostring(e):gsub("^[^\n]-:%d+: ", ""), 0) end
    self.execs[k] = e
  end
  -- per parameter: its array on every device, and its gradient on every device
  self.param_arrays, self.grad_arrays, self.aux_arrays = {}, {}, {}
  for i, name in ipairs(self.param_names) do
    local ws, gs = {}, {}
    for k, e in ipairs(self.execs) do ws[k], gs[k] = e.arg_dict[name], e.grad_dict[name] end
    self.param_arrays[i], self.grad_arrays[i] = ws, gs
  end
  for i, name in ipairs(self.aux_names) do
    local xs = {}
    for k, e in ipairs(self.execs) do xs[k] = e.aux_dict[name] end
    self.aux_arrays[i] = xs
  end
end

-- device k's part of a batch array along axis ax (the whole array on one device)
slice_of = function(self, x, ax, k)
  if #self.execs == 1 then return x end
  local sl = self.slices[k]
  if ax == 1 then return x[{ { sl[1], sl[2] } }] end
  return nd.slice_axis(x, { axis = ax, begin = sl[1], ["end"] = sl[2] })
end

-- the devices' parts joined along axis ax on the first device
local function merged(self, parts, ax)
  if #parts == 1 then return parts[1] end
  local on = {}
  for k = 1, #parts do on[k] = parts[k]:to(self.contexts[1]) end
  return nd.concat(on, { dim = ax })
end

-- a batch's arrays (data or label) copied into every executor's slice
local function load(self, descs, arrays, which)
  for j, d in ipairs(descs) do
    local x = arrays[j]
    if x == nil then error("Module.forward: the batch has no " .. which .. " " .. d.name, 0) end
    if not nd.is_tensor(x) then
      error("Module.forward: " .. which .. " " .. d.name .. " must be an NDArray, got " .. type(x), 0)
    end
    local ax = io_.DataDesc.get_batch_axis(d.layout)
    for k, e in ipairs(self.execs) do
      local part = slice_of(self, x, ax, k)
      local dst = e.arg_dict[d.name]
      if part:context() ~= dst:context() or part:dtype() ~= dst:dtype() then
        part = part:to(dst:context(), dst:dtype())
      end
      nd.copy(part, { out = dst })
    end
  end
end

function G:forward(batch, is_train)
  load(self, self.data_shapes, batch.data or {}, "data")
  if is_train and #self.label_shapes > 0 and batch.label then
    load(self, self.label_shapes, batch.label, "label")
  elseif #self.label_shapes > 0 and batch.label and #batch.label > 0 then
    load(self, self.label_shapes, batch.label, "label")
  end
  for _, e in ipairs(self.execs) do e:forward { is_train = is_train == true } end
end

-- out_grads: the head gradients of the whole batch, split as the outputs are (each
-- output's batch axis) and moved to each device
function G:backward(out_grads)
  for k, e in ipairs(self.execs) do
    local og
    if out_grads then
      og = {}
      for i, g in ipairs(out_grads) do
        local part = slice_of(self, g, self.output_axes[i] or 1, k)
        local ctx = self.contexts[k]
        if part:context() ~= ctx then part = part:to(ctx) end
        og[i] = part
      end
    end
    e:backward(og)
  end
end

-- outputs: merged along the batch axis (a list of NDArrays), or (merge false) per output
-- a list over the devices, as MXNet's
function G:get_outputs(merge)
  if merge == false then
    local r = {}
    for i = 1, #self.execs[1].outputs do
      r[i] = {}
      for k, e in ipairs(self.execs) do r[i][k] = e.outputs[i] end
    end
    return r
  end
  if #self.execs == 1 then return self.execs[1].outputs end
  local r = {}
  for i = 1, #self.execs[1].outputs do
    local parts = {}
    for k, e in ipairs(self.execs) do parts[k] = e.outputs[i] end
    r[i] = merged(self, parts, self.output_axes[i] or 1)
  end
  return r
end

function G:get_input_grads(merge)
  local r = {}
  for j, d in ipairs(self.data_shapes) do
    local parts = {}
    for k, e in ipairs(self.execs) do parts[k] = e.grad_dict[d.name] end
    if #parts == 0 or parts[1] == nil then
      error("Module.get_input_grads: bind with inputs_need_grad=true first", 0)
    end
    if merge == false then r[j] = parts
    else r[j] = merged(self, parts, io_.DataDesc.get_batch_axis(d.layout)) end
  end
  return r
end

-- metric:update(labels, outputs) per device (pre_sliced: labels already per device)
function G:update_metric(metric, labels, pre_sliced)
  for k, e in ipairs(self.execs) do
    local ls = {}
    for j, l in ipairs(labels or {}) do
      if pre_sliced then
        ls[j] = l[k]
      else
        local d = self.label_shapes[j]
        ls[j] = slice_of(self, l, io_.DataDesc.get_batch_axis(d and d.layout), k)
      end
    end
    metric:update(ls, e.outputs)
  end
end

-- the executors rebound for other shapes (MXNet's reshape: the arrays shared)
function G:reshape(data_shapes, label_shapes)
  local same = #data_shapes == #self.data_shapes
  for i = 1, #data_shapes do
    same = same and table.concat(data_shapes[i].shape, ",")
      == table.concat(self.data_shapes[i].shape, ",")
  end
  if same then return end
  local n = data_shapes[1].shape[io_.DataDesc.get_batch_axis(data_shapes[1].layout)]
  self.data_shapes, self.label_shapes = data_shapes, label_shapes or {}
  self.batch_size = n
  self.slices = slices(n, self.workload)
  for k, e in ipairs(self.execs) do
    local shapes = {}
    for _, d in ipairs(data_shapes) do shapes[d.name] = (sliced_shape(d, self.slices[k])) end
    for _, d in ipairs(self.label_shapes) do shapes[d.name] = (sliced_shape(d, self.slices[k])) end
    self.execs[k] = e:reshape(shapes, { allow_up_sizing = true, partial_shaping = true })
  end
end

return G
