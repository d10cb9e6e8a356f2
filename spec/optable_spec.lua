-- spec/optable_spec.lua — coverage checks derived from the op table: every op has a
-- doc, a gradient or nondiff, a reference kernel exported by libmx, and a case in
-- spec/<family>_spec.lua; docs/ops.md matches the table.
local ffi = require("ffi")
local lib = require("mx.core.lib")
local gen_docs = dofile("tools/gen_docs.lua")

local ops = lib.ops
local kernels_of = require("mx.core.opgen").kernels_of

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

-- Lua pattern-escape a name (op names are [%w_], but be safe)
local function pe(s) return (s:gsub("%p", "%%%0")) end

-- Does spec text mention op `name` as a call or a string? Accepts nd.name(, nd.name{,
-- x:name(, x:name{, F.name(, "name", 'name' — the name as a whole word.
local function mentions(text, name)
  local n = pe(name)
  for _, pat in ipairs {
    "[%.:]" .. n .. "%s*[%(%{\"']", "[%.:]" .. n .. "%f[^%w_]", "\"" .. n .. "\"", "'" .. n .. "'",
  } do
    if text:find(pat) then return true end
  end
  return false
end

describe("op table", function()
  it("has at least the core ops and unique names", function()
    assert.is_true(#ops >= 3)
    local seen = {}
    for _, op in ipairs(ops) do
      assert.is_nil(seen[op.name], "duplicate op " .. op.name)
      seen[op.name] = true
    end
  end)

  it("gives every op a doc, a family and a gradient or nondiff", function()
    local bad = {}
    for _, op in ipairs(ops) do
      if type(op.doc) ~= "string" or #op.doc < 5 then bad[#bad + 1] = op.name .. " (doc)" end
      if not op.family then bad[#bad + 1] = op.name .. " (family)" end
      if not (op.grad or op.nondiff) then bad[#bad + 1] = op.name .. " (grad/nondiff)" end
      if op.grad and type(op.grad) ~= "function" then bad[#bad + 1] = op.name .. " (grad type)" end
    end
    assert.are.same({}, bad)
  end)

  it("matches libmx's registry (names and order)", function()
    assert.equal(#ops, lib.C.mx_op_count())
    for _, op in ipairs(ops) do
      assert.equal(op.name, ffi.string(lib.C.mx_op_name(op.id)))
      assert.equal(op.id, lib.C.mx_op_find(op.name))
    end
  end)

  it("registers every kernel the op table declares, and no other (ref, cpu, dnnl)", function()
    local C = lib.C
    local bit = require("bit")
    local function has(op, b) return bit.band(C.mx_op_backends(op.id), bit.lshift(1, b)) ~= 0 end
    local names = {}
    for b = 0, 3 do names[ffi.string(C.mx_backend_name(b))] = b end
    assert.are.same({ ref = 0, cpu = 1, dnnl = 2, cuda = 3 }, names)
    -- the build has oneDNN when the first op declaring a dnnl kernel got one
    local dnnl_built
    for _, op in ipairs(ops) do
      if kernels_of(op).dnnl and dnnl_built == nil then dnnl_built = has(op, 2) end
    end
    local bad = {}
    for _, op in ipairs(ops) do
      local ks = kernels_of(op)
      local want = { ref = true, cpu = ks.cpu ~= nil, dnnl = ks.dnnl ~= nil and dnnl_built }
      for b, code in pairs({ ref = 0, cpu = 1, dnnl = 2 }) do
        if has(op, code) ~= want[b] then
          bad[#bad + 1] = op.name .. ": " .. b .. (want[b] and " missing" or " registered, not declared")
        end
      end
    end
    assert.are.same({}, bad)
  end)

  it("defines in libmx_cuda every CUDA kernel the op table declares", function()
    local so = "build/lib/mx/libmx_cuda.so"
    local f = io.open(so, "rb")
    if not f then
      pending("libmx_cuda not built (no nvcc): " .. so)
      return
    end
    f:close()
    local p = io.popen("nm -D --defined-only " .. so .. " 2>/dev/null")
    local syms = {}
    for line in p:lines() do
      local name = line:match("%s(mx_cuda_[%w_]+)$")
      if name then syms[name] = true end
    end
    p:close()
    assert.is_true(syms.mx_cuda_register_kernels, "mx_cuda_register_kernels not exported")
    local missing = {}
    for _, op in ipairs(ops) do
      local k = kernels_of(op).cuda
      if k and not syms["mx_cuda_" .. k.name] then missing[#missing + 1] = "mx_cuda_" .. k.name end
    end
    assert.are.same({}, missing)
  end)

  it("has a case for every op in spec/<family>_spec.lua (or spec/<family>_<topic>_spec.lua)", function()
    local cache, missing = {}, {}
    -- a family's spec text: spec/<family>_spec.lua and the topic files beside it
    local function family_text(family)
      local path = "spec/" .. family .. "_spec.lua"
      local text = read(path)
      if not text then return false end
      local p = io.popen("ls spec/" .. family .. "_*_spec.lua 2>/dev/null")
      for f in p:lines() do text = text .. "\n" .. read(f) end
      p:close()
      return text
    end
    for _, op in ipairs(ops) do
      local path = "spec/" .. op.family .. "_spec.lua"
      if cache[path] == nil then cache[path] = family_text(op.family) end
      local text = cache[path]
      if not text then
        missing[#missing + 1] = op.name .. " (no " .. path .. ")"
      elseif not mentions(text, op.name) then
        missing[#missing + 1] = op.name .. " (not in " .. path .. ")"
      end
    end
    if #missing > 0 then
      error(#missing .. " op(s) without a spec case:\n  " .. table.concat(missing, "\n  "), 0)
    end
  end)

  it("is documented by an up-to-date docs/ops.md (luajit tools/gen_docs.lua)", function()
    local want = gen_docs.render(gen_docs.load_ops("."))
    local have = read("docs/ops.md")
    assert.is_truthy(have, "docs/ops.md missing: run `luajit tools/gen_docs.lua`")
    if have ~= want then
      error("docs/ops.md is out of date with core/ops/optable.lua: run `luajit tools/gen_docs.lua`", 0)
    end
  end)
end)

describe("op table from C (core/src/attrs.c, mx_op_find)", function()
  require("mx.nd") -- prepares every op's Lua defaults (lua/mx/nd/params.lua)
  local C = lib.C

  it("has mx_op_params_init give every op the Lua side's defaults, byte for byte", function()
    local bad, checked = {}, 0
    for _, op in ipairs(ops) do
      local size = tonumber(C.mx_op_params_size(op.id))
      if op.ctype then
        assert.equals(op.size, size, op.name .. ": params size")
        assert.is_truthy(op.defaults, op.name .. ": no Lua defaults")
        local buf = ffi.new("uint8_t[?]", size)
        -- garbage first: init must set every byte it owns
        ffi.fill(buf, size, 0xa5)
        if C.mx_op_params_init(op.id, buf) ~= 0 then
          bad[#bad + 1] = op.name .. ": " .. ffi.string(C.mx_last_error())
        elseif ffi.string(buf, size) ~= ffi.string(op.defaults, size) then
          bad[#bad + 1] = op.name .. ": defaults differ from the Lua side's"
        end
        checked = checked + 1
      else
        assert.equals(0, size, op.name .. ": a params size without a struct")
        assert.equals(0, C.mx_op_params_init(op.id, nil))
      end
    end
    assert.are.same({}, bad)
    assert.is_true(checked > 50)
    assert.equals(-1, C.mx_op_params_init(#ops, nil))
  end)

  it("has mx_op_find find every luamx name and every declared MXNet name", function()
    local bad, owner = {}, {}
    for _, op in ipairs(ops) do
      if C.mx_op_find(op.name) ~= op.id then bad[#bad + 1] = op.name end
      for _, m in ipairs(op.mxnet or {}) do
        -- an MXNet name must not also name another op (luamx names are looked up first)
        assert.is_nil(owner[m], "MXNet name " .. m .. " declared by " .. tostring(owner[m])
          .. " and " .. op.name)
        owner[m] = op.name
        if C.mx_op_find(m) ~= op.id then bad[#bad + 1] = m .. " (" .. op.name .. ")" end
      end
    end
    assert.are.same({}, bad)
    assert.equals(-1, C.mx_op_find("NoSuchOperator"))
    assert.equals(-1, C.mx_op_find(nil))
    for _, name in ipairs { "FullyConnected", "Activation", "elemwise_add", "broadcast_add",
      "_plus_scalar", "BlockGrad", "SwapAxis", "Concat", "Reshape", "Cast", "softmax" } do
      assert.is_true(C.mx_op_find(name) >= 0, name)
    end
  end)
end)

describe("op table files (core/ops/optable.lua joins core/ops/<family>.lua)", function()
  local function sh(cmd)
    local p = assert(io.popen(cmd))
    local out = p:read("*a")
    p:close()
    return out
  end

  it("has one file per family, each joined, each family's ops together in table order", function()
    local files = {}
    for f in sh("ls core/ops"):gmatch("([%w_]+)%.lua\n") do
      if f ~= "optable" then files[f] = true end
    end
    local families, last, bad = {}, nil, {}
    for _, op in ipairs(ops) do
      if op.family ~= last then
        if families[op.family] then bad[#bad + 1] = op.name .. " (family split up)" end
        families[op.family], last = true, op.family
      end
    end
    for f in pairs(files) do
      if not families[f] then bad[#bad + 1] = "core/ops/" .. f .. ".lua (no op of it joined)" end
    end
    for f in pairs(families) do
      if not files[f] then bad[#bad + 1] = f .. " (no core/ops/" .. f .. ".lua)" end
    end
    assert.are.same({}, bad)
  end)

  it("reads the same at build time (core/ops/) and at run time (mx.core.ops.optable)", function()
    local built = require("mx.core.opgen").normalize(dofile("core/ops/optable.lua"))
    assert.equal(#ops, #built)
    for i, op in ipairs(ops) do
      assert.equal(op.name, built[i].name)
      assert.are.same(op.mxnet, built[i].mxnet, op.name .. ": mxnet")
    end
  end)

  it("rejects a family file with another family's op or MXNet names for no op of its own", function()
    local dir = sh("mktemp -d /tmp/luamx-optable.XXXXXX"):match("^(%S+)")
    assert.is_truthy(dir)
    finally(function() sh("rm -rf " .. dir) end)
    sh("cp core/ops/*.lua " .. dir)
    local image = read(dir .. "/image.lua")
    local function try(text)
      local f = assert(io.open(dir .. "/image.lua", "wb"))
      f:write(text)
      f:close()
      return pcall(dofile, dir .. "/optable.lua")
    end
    assert.is_true((try(image)))
    local ok, err = try((image:gsub('family = "image"', 'family = "shape"')))
    assert.is_false(ok)
    assert.matches("image.lua: op to_tensor has family shape", err, 1, true)
    ok, err = try((image:gsub("\nreturn ops, MXNET", '\nMXNET.zeros = { "_zeros" }\nreturn ops, MXNET')))
    assert.is_false(ok)
    assert.matches("image.lua: MXNet names for zeros, not an op of this file", err, 1, true)
    ok, err = try((image:gsub('family = "image",', 'family = "image", mxnet = { "x" },')))
    assert.is_false(ok)
    -- (which op is named first follows the MXNET table's iteration order)
    assert.matches("image.lua: op [%w_]+: MXNet names given twice", err)
  end)
end)
