-- spec/helpers/sweep_apis.lua — the DataLoader, kvstore and session hand-over part of the
-- surface sweep (spec/sweep_surfaces_spec.lua), GENERATED from what the APIs expose:
--   * DataLoader: every option (the constructor's "valid:" list) with wrong values, and
--     every combination of workers (0, 1, 2), batch size, last_batch, shuffle with a seed
--     and prefetch giving the batches of num_workers = 0;
--   * kvstore: every public method of the 'local' and 'device' stores with wrong
--     arguments (none, a number, a string, a table, a wrong shape, an unknown key), and
--     init / push / pull / pushpull / broadcast on several keys and devices giving the
--     sums computed here;
--   * session hand-over: export then import of every dtype, a view, 0-size and 8-dim
--     tensors, `imports` counts, and import of every kind of wrong handle.
-- A new option or method is swept the day it is added.
--   require("helpers.sweep_apis").cases(mx) -> cases (child_gluon's form)
local M = {}

local BAD = { "nil", '"x"', "-1", "0/0", "2.5", "{}", "true", "1e12", "nd.ones({2})" }

local function options_of(f)
  local ok, err = pcall(f)
  if ok then return {} end
  local list = tostring(err):match("%(valid: ([^)]*)%)")
  local names = {}
  for n in (list or ""):gmatch("[%w_]+") do names[#names + 1] = n end
  return names
end

local function dataloader_cases(mx, case)
  local DL = mx.gluon.data.DataLoader
  local ds = mx.gluon.data.ArrayDataset(mx.nd.ones({ 4, 2 }))
  local names = { "DataLoader" }
  local setup = "local ds = gluon.data.ArrayDataset(nd.arange(0, 14):reshape({7, 2}), nd.arange(0, 7))"
  for _, o in ipairs(options_of(function() return DL(ds, { batch_size = 2, __sweep_probe = 1 }) end)) do
    for _, v in ipairs(BAD) do
      local opts = o == "batch_size" and ("{batch_size = " .. v .. "}")
        or ("{batch_size = 2, " .. o .. " = " .. v .. "}")
      -- a loader it accepts must give the 7 samples' batches (or a clear error when iterated)
      case { id = "DataLoader/option " .. o .. "=" .. v, names = names, setup = setup,
        call = "(function() local l = gluon.data.DataLoader(ds, " .. opts .. ") "
          .. "local n = 0 for a in l:iter() do n = n + a:shape()[1] end l:close() return n end)()",
        expect = "either", check = "r >= 0 and r <= 7" }
    end
  end
  -- valid combinations: the same batches as num_workers = 0
  local combo = [[
local function batches(opts)
  local l = gluon.data.DataLoader(ds, opts)
  local out = {}
  for a, b in l:iter() do out[#out + 1] = { a:tolist(), b:tolist() } end
  l:close()
  return out
end
local function same_as_no_workers(opts)
  local mine = batches(opts)
  local o0 = {}
  for k, v in pairs(opts) do o0[k] = v end
  o0.num_workers, o0.prefetch = nil, nil
  local want = batches(o0)
  if #mine ~= #want then error("DataLoader: " .. #mine .. " batches, " .. #want .. " without workers", 0) end
  for i = 1, #want do
    for f = 1, 2 do
      local x, y = mine[i][f], want[i][f]
      if #x ~= #y then error("DataLoader: batch " .. i .. " field " .. f .. " size differs", 0) end
      for j = 1, #y do
        if x[j] ~= y[j] then error("DataLoader: batch " .. i .. " field " .. f .. " differs", 0) end
      end
    end
  end
  return #want
end
]]
  for _, nw in ipairs({ 0, 1, 2 }) do
    for _, bs in ipairs({ 1, 3, 8 }) do
      for _, lb in ipairs({ "keep", "discard", "rollover" }) do
        for _, sh in ipairs({ false, true }) do
          for _, pf in ipairs({ "nil", "1" }) do
            if nw > 0 or pf == "nil" then
              local opts = string.format("{batch_size = %d, last_batch = %q, num_workers = %d, "
                .. "prefetch = %s%s}", bs, lb, nw, pf, sh and ", shuffle = true, seed = 5" or "")
              case { id = "DataLoader/" .. opts, names = names, setup = setup .. "\n" .. combo,
                call = "same_as_no_workers(" .. opts .. ")", expect = "result", check = "r >= 0" }
            end
          end
        end
      end
    end
  end
end

local function kvstore_cases(mx, case)
  local KV = mx.kv.KVStore or require("mx.kvstore").KVStore
  local methods = {}
  for k, v in pairs(KV) do
    if type(k) == "string" and type(v) == "function" and k:match("^%l") then methods[#methods + 1] = k end
  end
  table.sort(methods)
  local ARGS = { "", "nil", "5", '"x"', "{}", "nd.ones({7})", "'nokey', nd.ones({3})", "1, 5", "1, {}",
    "1, nd.ones({2, 2})", "1, nd.ones({3}), 5" }
  for _, kind in ipairs({ "local", "device" }) do
    local setup = "local kv = mx.kv.create('" .. kind .. "')\nkv:init(1, nd.zeros({3}))"
    for _, m in ipairs(methods) do
      for _, a in ipairs(ARGS) do
        case { id = "kvstore " .. kind .. ":" .. m .. "(" .. a .. ")", names = { "KVStore", m },
          setup = setup, call = "kv:" .. m .. "(" .. a .. ")", expect = "either", check = "true" }
      end
    end
    -- the sums
    case { id = "kvstore " .. kind .. ": init, push, pull, pushpull, broadcast sums", names = { "KVStore" },
      setup = setup, expect = "result", check = "r == true", call = [[(function()
  local ctx = { mx.cpu(0), mx.cpu(1) }
  kv:init({ 2, 3 }, { nd.full({ 2 }, 1), nd.full({ 3 }, 2) })
  kv:push(2, { nd.full({ 2 }, 3, { ctx = ctx[1] }), nd.full({ 2 }, 4, { ctx = ctx[2] }) })
  local o = { nd.zeros({ 2 }, { ctx = ctx[1] }), nd.zeros({ 2 }, { ctx = ctx[2] }) }
  kv:pull(2, o)
  for _, t in ipairs(o) do for _, v in ipairs(t:tolist()) do if v ~= 7 then return false end end end
  local g = { nd.full({ 3 }, 1), nd.full({ 3 }, 5) }
  kv:pushpull(3, g, g)
  for _, t in ipairs(g) do for _, v in ipairs(t:tolist()) do if v ~= 6 then return false end end end
  local bo = nd.zeros({ 4 })
  kv:broadcast(4, nd.full({ 4 }, 9), bo)
  for _, v in ipairs(bo:tolist()) do if v ~= 9 then return false end end
  return true
end)()]] }
  end
  -- (no name is MXNet's 'local')
  for _, bad in ipairs({ "'nope'", "5", "{}", "true" }) do
    case { id = "kvstore create(" .. bad .. ")", names = { "kv.create", "KVStore" },
      call = "mx.kv.create(" .. bad .. ")", expect = "error" }
  end
end

local function session_cases(case)
  local names = { "mx.session" }
  local KINDS = {
    { "float32", "nd.arange(0, 6):reshape({2, 3})" },
    { "float64", "nd.arange(0, 6, {dtype = 'float64'})" },
    { "float16", "nd.arange(0, 6):astype('float16')" },
    { "bfloat16", "nd.arange(0, 6):astype('bfloat16')" },
    { "int64", "nd.arange(0, 6):astype('int64')" },
    { "uint8", "nd.arange(0, 6):astype('uint8')" },
    { "bool", "nd.arange(0, 6):astype('bool')" },
    { "view", "nd.arange(0, 12):reshape({3, 4})[2]" },
    { "0-size", "nd.ones({0, 3})" },
    { "8-dim", "nd.ones({1, 2, 1, 2, 1, 2, 1, 2})" },
    { "0-d", "nd.array(5)" },
  }
  for _, k in ipairs(KINDS) do
    for _, n in ipairs({ 1, 3 }) do
      case { id = "session export/import " .. k[1] .. " x" .. n, names = names, expect = "result",
        check = "r == true", setup = "local x = " .. k[2], call = [[(function()
  local h = mx.session.export(x, { imports = ]] .. n .. [[ })
  for _ = 1, ]] .. n .. [[ do
    local y = mx.session.import(h)
    if y:dtype() ~= x:dtype() or table.concat(y:shape(), "x") ~= table.concat(x:shape(), "x") then
      return false
    end
    if x:size() > 0 and y:astype("float64"):sum():item() ~= x:astype("float64"):sum():item() then
      return false
    end
  end
  return not pcall(mx.session.import, h) and mx.session.imports_left(h) == 0
end)()]] }
    end
  end
  local WRONG = { "nil", "0", "-1", "1.5", "0/0", "1/0", "2^53", "2^60", '"5"', "{}", "true",
    "nd.ones({1})", "1", "42", "4503599627370496" }
  for _, v in ipairs(WRONG) do
    case { id = "session import(" .. v .. ")", names = names, call = "mx.session.import(" .. v .. ")" }
    case { id = "session revoke(" .. v .. ")", names = names, call = "mx.session.revoke(" .. v .. ")" }
  end
  for _, v in ipairs({ "nil", "5", '"x"', "{}" }) do
    case { id = "session export(" .. v .. ")", names = names, call = "mx.session.export(" .. v .. ")" }
  end
  for _, v in ipairs(BAD) do
    case { id = "session export imports=" .. v, names = names,
      call = "mx.session.export(nd.ones({2}), {imports = " .. v .. "})",
      -- (nil: the default 1; 1e12: a whole number, allowed)
      expect = (v == "nil" or v == "1e12") and "either" or "error", check = "type(r) == 'number'" }
  end
end

function M.cases(mx)
  local cases = {}
  local function case(t) cases[#cases + 1] = t end
  dataloader_cases(mx, case)
  kvstore_cases(mx, case)
  session_cases(case)
  return cases
end

return M
