-- spec/helpers/onnx_case.lua — one ONNX backend test case (a folder with model.onnx and
-- test_data_set_N/{input,output}_K.pb, as libonnx-testdata ships them) run through
-- luamx: imported with mx.onnx's C importer (input shapes and types from the data),
-- compiled by the graph executor and compared with the expected outputs.
--   local r = require("helpers.onnx_case")(dir)
--   r.status: "pass", "fail" or "unsupported"; r.frozen: passed only with every input a
--   constant (its values decide a shape); r.why: the reason for anything but a pass.
local mx = require("mx")
local lib = require("mx.core.lib")
local ffi, C = lib.ffi, lib.C
local onnx = require("mx.onnx")

local function exists(p)
  local f = io.open(p, "rb")
  if f then f:close() end
  return f ~= nil
end

local function list_pb(dir, prefix)
  local out = {}
  for k = 0, 63 do
    local p = dir .. "/" .. prefix .. "_" .. k .. ".pb"
    if not exists(p) then break end
    out[#out + 1] = p
  end
  return out
end

-- exact for integers and bools; rtol 1e-3, atol 1e-7 as ONNX's backend test runner
-- (onnx/backend/test/runner), NaN where NaN is expected
local function close(want, got)
  if want:dtype() ~= got:dtype() then
    return false, "dtype " .. got:dtype() .. ", expected " .. want:dtype()
  end
  local ws, gs = want:shape(), got:shape()
  if #ws ~= #gs then return false, "rank " .. #gs .. ", expected " .. #ws end
  for i = 1, #ws do
    if ws[i] ~= gs[i] then
      return false, "shape (" .. table.concat(gs, ",") .. "), expected (" .. table.concat(ws, ",") .. ")"
    end
  end
  if want:size() == 0 then return true end
  local dt = want:dtype()
  local ints = { int64 = true, int32 = true, int16 = true, int8 = true, uint8 = true, bool = true }
  if ints[dt] then
    local a, b = want:astype("float64"):tolist(), got:astype("float64"):tolist()
    for i = 1, #a do
      if a[i] ~= b[i] then return false, "element " .. i .. ": " .. b[i] .. " vs " .. a[i] end
    end
    return true
  end
  local a, b = want:astype("float64"):tolist(), got:astype("float64"):tolist()
  for i = 1, #a do
    local x, y = a[i], b[i]
    if x ~= x then
      if y == y then return false, "element " .. i .. ": " .. y .. " vs nan" end
    elseif x == math.huge or x == -math.huge then
      if y ~= x then return false, "element " .. i .. ": " .. y .. " vs " .. x end
    elseif math.abs(x - y) > 1e-7 + 1e-3 * math.abs(x) or y ~= y then
      return false, string.format("element %d: %.9g vs %.9g", i, y, x)
    end
  end
  return true
end

-- string tensors: the same shape and the same bytes in every element
local function close_strings(want, got)
  if not onnx.is_strings(got) then return false, "an NDArray, expected strings" end
  local ws, gs = want:shape(), got:shape()
  if table.concat(ws, ",") ~= table.concat(gs, ",") then
    return false, "shape (" .. table.concat(gs, ",") .. "), expected (" .. table.concat(ws, ",") .. ")"
  end
  local a, b = want:tolist(), got:tolist()
  for i = 1, #a do
    if a[i] ~= b[i] then return false, string.format("element %d: %q vs %q", i, b[i], a[i]) end
  end
  return true
end

-- a model of string ops (its session runs on string tensors: docs/onnx.md, "Strings")
local function run_strings(model, sets)
  local sess = onnx.load_model(model)
  for _, d in ipairs(sets) do
    local ins = {}
    for k, p in ipairs(list_pb(d, "input")) do
      local t, name = onnx.load_tensor(p)
      ins[name ~= "" and name or sess.input_names[k]] = t
    end
    local got = sess:run(ins)
    for k, p in ipairs(list_pb(d, "output")) do
      local want = onnx.load_tensor(p)
      if not got[k] then return "fail", "output " .. k .. " missing" end
      local ok, why
      if onnx.is_strings(want) then ok, why = close_strings(want, got[k])
      else ok, why = false, "strings, expected an NDArray" end
      if not ok then return "fail", sess.output_names[k] .. ": " .. why end
    end
  end
  return "pass"
end

local function run(dir, freeze)
  local model = dir .. "/model.onnx"
  local sets = {}
  for k = 0, 9 do
    local d = dir .. "/test_data_set_" .. k
    if not exists(d .. "/input_0.pb") and not exists(d .. "/output_0.pb") then break end
    sets[#sets + 1] = d
  end
  if #sets == 0 then return "fail", "no test data" end
  local meta = onnx.get_model_metadata(model)
  local strings = #meta.output_tensor_data > 0
  for _, side in ipairs { meta.input_tensor_data, meta.output_tensor_data } do
    for _, m in ipairs(side) do strings = strings and m[3] == "string" end
  end
  if strings then return run_strings(model, sets) end
  for _, d in ipairs(sets) do
    local ins, shapes, types, consts = {}, {}, {}, {}
    for k, p in ipairs(list_pb(d, "input")) do
      local t, name = onnx.load_tensor(p)
      local m = meta.input_tensor_data[k]
      if name == "" then name = m and m[1] or ("input_" .. (k - 1)) end
      ins[name] = t
      if not onnx.is_strings(t) then -- (the importer refuses a string input itself)
        shapes[name] = t:shape()
        types[name] = t:dtype()
        if freeze then consts[name] = t end
      end
    end
    local g, outs = onnx._import_graph("onnx case", model,
      { input_shapes = shapes, input_types = types, constants = freeze and consts or nil }, 1)
    -- the executor's inputs: the variables without a value, in node order
    local vars = {}
    for i = 0, C.mx_graph_num_nodes(g) - 1 do
      if C.mx_graph_node_op(g, i) == -1 and C.mx_graph_node_value(g, i) == nil then
        vars[#vars + 1] = ffi.string(C.mx_graph_node_name(g, i))
      end
    end
    local descs = ffi.new("mx_desc[?]", math.max(#vars, 1))
    local hs = ffi.new("mx_tensor*[?]", math.max(#vars, 1))
    for i, name in ipairs(vars) do
      local t = ins[name]
      if not t then error("no data for input " .. name) end
      local s = t:shape()
      descs[i - 1].ndim = #s
      for j = 1, #s do descs[i - 1].shape[j - 1] = s[j] end
      descs[i - 1].dtype = C.mx_tensor_dtype(t.h)
      descs[i - 1].layout = 0
      descs[i - 1].dev_type, descs[i - 1].dev_id = 1, 0
      hs[i - 1] = t.h
    end
    local ep = ffi.new("mx_graph_exec*[1]")
    if C.mx_graph_exec_new(g, #vars, descs, 0, ep) ~= 0 then error(ffi.string(C.mx_last_error())) end
    local e = ffi.gc(ep[0], C.mx_graph_exec_free)
    local nout = C.mx_graph_exec_num_outputs(e)
    local ob = ffi.new("mx_tensor*[?]", math.max(nout, 1))
    if C.mx_graph_exec_run(e, #vars, hs, nout, ob) ~= 0 then error(ffi.string(C.mx_last_error())) end
    local got = {}
    for k = 0, nout - 1 do got[k + 1] = mx.nd._wrap(ob[k]) end
    for k, p in ipairs(list_pb(d, "output")) do
      local want = onnx.load_tensor(p)
      if not got[k] then return "fail", "output " .. k .. " missing" end
      local ok, why = close(want, got[k])
      if not ok then return "fail", (outs[k] or ("output " .. k)) .. ": " .. why end
    end
  end
  return "pass"
end

return function(dir)
  local ok, status, why = pcall(run, dir, false)
  if ok and status == "pass" then return { status = "pass" } end
  local first = ok and why or tostring(status)
  -- a value that luamx needs at import (a shape, starts, pads) came as an input: try again
  -- with every input a constant
  if first:find("must be a constant", 1, true) or first:find("is not known at import", 1, true) then
    local ok2, st2, why2 = pcall(run, dir, true)
    if ok2 and st2 == "pass" then return { status = "pass", frozen = true } end
    first = ok2 and why2 or tostring(st2)
  end
  if first:find("unsupported", 1, true) then return { status = "unsupported", why = first } end
  return { status = "fail", why = first }
end
