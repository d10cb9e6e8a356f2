-- Messages that used to be raw Lua errors, silent acceptances or late failures: each
-- now names what is wrong, at the caller's line where the caller is Lua.
local mx = require("mx")
local nd, gdata = mx.nd, mx.gluon.data

local FILE = "clear_errors_spec.lua"
local function err_of(f)
  local ok, e = pcall(f)
  assert.is_false(ok, "no error")
  return tostring(e)
end

local function json_with(node_attrs, op_node)
  local fc = '{"op":"FullyConnected","name":"fc","attrs":{"num_hidden":"3","no_bias":"True"},'
    .. '"inputs":[[0,0,0],[1,0,0]]}'
  return '{"nodes":[{"op":"null","name":"data"' .. (node_attrs and (',"attrs":{' .. node_attrs .. '}') or "")
    .. ',"inputs":[]},{"op":"null","name":"w","inputs":[]},' .. (op_node or fc)
    .. '],"arg_nodes":[0,1],"heads":[[2,0,0]],"attrs":{"mxnet_version":["int",10901]}}'
end

describe("clear errors", function()
  it("autograd.grad with no heads", function()
    local x = nd.ones({ 2 })
    x:attach_grad()
    for _, h in ipairs({ false, {} }) do
      local e = err_of(function() local g = mx.autograd.grad(h or nil, x); return g end)
      assert.truthy(e:find(FILE .. ":%d+: grad: heads must be a tensor or a non%-empty list of tensors"), e)
    end
  end)

  it("a dataset giving a different number of fields for some sample", function()
    local ds = gdata.SimpleDataset({ 1, 2, 3, 4 }):transform(function(v)
      if v == 3 then return nd.array({ v }) end
      return nd.array({ v }), nd.array({ 0 })
    end)
    local e = err_of(function() for _ in gdata.DataLoader(ds, { batch_size = 4 }):iter() do end end)
    assert.truthy(e:find(FILE .. ":%d+: DataLoader: sample 3 %(index 3%) has 1 field where sample 1 "
      .. "%(index 1%) has 2"), e)
  end)

  it("a DataLoader timeout of NaN", function()
    local e = err_of(function()
      local l = gdata.DataLoader(gdata.SimpleDataset({ 1 }), { batch_size = 1, timeout = 0 / 0 })
      return l
    end)
    assert.truthy(e:find(FILE .. ":%d+: DataLoader: timeout must be a positive number of seconds, got"), e)
  end)

  it("ImageRecordDataset on a .rec without its .idx", function()
    local dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir -p " .. dir)
    os.execute("cp spec/fixtures/mx191_rec.rec " .. dir .. "/only.rec")
    local e = err_of(function()
      local d = gdata.vision.ImageRecordDataset(dir .. "/only.rec")
      return d
    end)
    os.execute("rm -rf " .. dir)
    assert.truthy(e:find(FILE .. ":%d+: ImageRecordDataset: [^ ]*only%.rec has no index beside it "
      .. "%([^ ]*only%.idx is missing%)"), e)
  end)

  it("num_hidden = \"-3\" in a symbol file is named when the file loads", function()
    local js = json_with(nil, '{"op":"FullyConnected","name":"fc","attrs":{"num_hidden":"-3",'
      .. '"no_bias":"True"},"inputs":[[0,0,0],[1,0,0]]}')
    local e = err_of(function() local s = mx.sym.fromjson(js); return s end)
    assert.truthy(e:find("symbol JSON: node 2 'fc' %(FullyConnected%): fully_connected: num_hidden "
      .. "must be >= 1, got %-3"), e)
    -- eagerly too, whatever the weight
    e = err_of(function()
      return nd.fully_connected(nd.ones({ 2, 3 }), nd.ones({ 3, 3 }), { num_hidden = 0, no_bias = true })
    end)
    assert.truthy(e:find("num_hidden must be >= 1, got 0", 1, true), e)
  end)

  it("__shape__ / __dtype__ values that do not parse are errors naming the node", function()
    for _, a in ipairs({ '"__shape__":"(2,x)"', '"__shape__":"(-5, 3)"', '"__shape__":"2,3"',
      '"__shape__":"(1,2,3,4,5,6,7,8,9)"', '"__dtype__":"99"', '"__dtype__":"float99"' }) do
      local e = err_of(function() local s = mx.sym.fromjson(json_with(a)); return s end)
      assert.truthy(e:find("symbol JSON: node 0 'data': __%a+__=", 1) and
        (e:find("is not a shape", 1, true) or e:find("is not a dtype", 1, true)), e)
    end
    for _, a in ipairs({ '"__shape__":"(2, 3)"', '"__shape__":"[2,3]"', '"__shape__":"(0, 3)"',
      '"__shape__":"()"', '"__shape__":"(5,)"', '"__dtype__":"0"', '"__dtype__":"float16"' }) do
      assert.is_true(pcall(mx.sym.fromjson, json_with(a)), a)
    end
  end)

  local BAD_ATTRS = { { "__shape__", "(2,x)" }, { "__shape__", "(-5, 3)" }, { "__shape__", "2,3" },
    { "__shape__", "(1,2,3,4,5,6,7,8,9)" }, { "__shape__", "(2,,3)" }, { "__shape__", "(2, 3" },
    { "__dtype__", "99" }, { "__dtype__", "float99" }, { "__dtype__", "" }, { "__dtype__", "-1" } }
  local GOOD_ATTRS = { { "__shape__", "(2, 3)" }, { "__shape__", "[2,3]" }, { "__shape__", "(0, -1)" },
    { "__shape__", "()" }, { "__shape__", "(5,)" }, { "__dtype__", "0" }, { "__dtype__", "float16" } }

  it("__shape__ / __dtype__ with invalid values: refused by the C runtime and MXNet's predict API", function()
    local ffi = require("ffi")
    local C = require("mx.core.lib").C
    pcall(ffi.cdef, [[
      int MXPredCreate(const char *symbol_json_str, const void *param_bytes, int param_size,
                       int dev_type, int dev_id, uint32_t num_input_nodes, const char **input_keys,
                       const uint32_t *input_shape_indptr, const uint32_t *input_shape_data, void **out);
      int MXPredFree(void *handle);
      const char *MXGetLastError(void);
    ]])
    require("mx.serve.runtime")
    local dir = os.tmpname()
    local keys = ffi.new("const char *[1]", { "data" })
    local indptr, shape = ffi.new("uint32_t[2]", { 0, 2 }), ffi.new("uint32_t[2]", { 2, 3 })
    for _, a in ipairs(BAD_ATTRS) do
      local js = json_with(string.format('"%s":"%s"', a[1], a[2]))
      -- the runtime (mx_runtime.h), from a file
      local f = assert(io.open(dir, "wb"))
      f:write(js)
      f:close()
      local e = err_of(function()
        local m = require("mx.serve.runtime").load { symbol = dir,
          inputs = { { name = "data", shape = { 2, 3 } } } }
        return m
      end)
      local want = "symbol JSON: node 0 'data': " .. a[1] .. '="' .. a[2] .. '" is not a '
      assert.truthy(e:find(want, 1, true), e)
      -- the predict API
      local h = ffi.new("void *[1]")
      local rc = C.MXPredCreate(js, nil, 0, 1, 0, 1, keys, indptr, shape, h)
      assert.are_not.equal(0, rc, a[2])
      e = ffi.string(C.MXGetLastError())
      assert.truthy(e:find(a[1] .. '="' .. a[2] .. '" is not a ', 1, true), e)
    end
    os.remove(dir)
  end)

  it("__shape__ / __dtype__ with invalid values: refused wherever mx.sym sets them, at the caller's line",
    function()
    local sym = mx.sym
    for _, a in ipairs(BAD_ATTRS) do
      local want = a[1] .. '="' .. a[2] .. '" is not a '
      local function named(e, who)
        assert.truthy(e:find(FILE .. ":%d+: " .. who:gsub("%p", "%%%0") .. ": ") and e:find(want, 1, true), e)
      end
      -- (no tail calls: the caller's line must be there to blame)
      named(err_of(function() local v = sym.var("x", { attr = { [a[1]] = a[2] } }); return v end), "sym.var")
      named(err_of(function()
        local v = sym.FullyConnected(sym.var("x"), { num_hidden = 2, attr = { [a[1]] = a[2] } })
        return v
      end), "fully_connected")
      named(err_of(function()
        local v = mx.AttrScope({ [a[1]] = a[2] }, function() return sym.var("y") end)
        return v
      end), "AttrScope")
      named(err_of(function() sym.var("z"):_set_attr({ [a[1]] = a[2] }) end), "Symbol._set_attr")
      -- the C graph's own setter (the lowering, the C API)
      local C = require("mx.core.lib").C
      local ffi = require("ffi")
      local g = ffi.gc(C.mx_graph_new(), C.mx_graph_free)
      local id = C.mx_graph_add_var(g, "v")
      assert.are_not.equal(0, C.mx_graph_set_attr(g, id, a[1], a[2]))
      local e = ffi.string(C.mx_last_error())
      assert.truthy(e:find("mx_graph_set_attr: node 0 'v': " .. want, 1, true), e)
    end
    for _, a in ipairs(GOOD_ATTRS) do
      local v = sym.var("x", { attr = { [a[1]] = a[2] } })
      assert.equal(a[2], v:attr(a[1]))
      v:_set_attr({ [a[1]] = a[2] })
      assert.is_true(pcall(mx.AttrScope, { [a[1]] = a[2] }, function() return sym.var("y") end), a[2])
      assert.is_true(pcall(sym.fromjson, v:tojson()), a[2])
    end
  end)

  it(":export on a Block that is not a HybridBlock", function()
    local net = mx.gluon.nn.Sequential()
    net:add(mx.gluon.nn.Dense(2, { in_units = 2 }))
    net:initialize()
    local e = err_of(function() local a, b = net:export("/tmp/never"); return a, b end)
    assert.truthy(e:find(FILE .. ":%d+: export: Sequential is a Block, not a HybridBlock"), e)
  end)
end)
