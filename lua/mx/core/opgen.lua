-- mx.core.opgen — turns the op table (core/ops/optable.lua joining the family tables
-- core/ops/<family>.lua; at run time mx.core.ops.optable, lua/mx/core/ops being core/ops)
-- into what the rest of the system needs. Used twice from the same code:
--   * at build time by tools/gen_ops.lua, to write the C registry and param structs;
--   * at run time by mx.core.lib, to ffi.cdef the very same struct text.
-- One text for both sides is what keeps the C and FFI layouts identical.
local M = {}

-- Param types: C field type, and the registry's MX_PT_* code.
M.ptypes = {
  int = { ctype = "int64_t", code = "MX_PT_INT" },
  float = { ctype = "double", code = "MX_PT_FLOAT" },
  bool = { ctype = "bool", code = "MX_PT_BOOL" },
  dtype = { ctype = "int32_t", code = "MX_PT_DTYPE" },
  axis = { ctype = "int64_t", code = "MX_PT_AXIS" },
  enum = { ctype = "int32_t", code = "MX_PT_ENUM" },
  axes = { ctype = "mx_tuple", code = "MX_PT_AXES", tuple = true },
  shape = { ctype = "mx_tuple", code = "MX_PT_SHAPE", tuple = true },
  ints = { ctype = "mx_tuple", code = "MX_PT_INTS", tuple = true },
  floats = { ctype = "mx_ftuple", code = "MX_PT_FLOATS", tuple = true },
}

M.dtype_sets = {
  all = { 0, 1, 2, 3, 4, 5, 6, 7, 12 },
  -- every dtype a tensor may hold: int16 (8) only moves through cast and copy
  storage = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 12 },
  numeric = { 0, 1, 2, 3, 4, 5, 6, 12 },
  float = { 0, 1, 2, 12 },
  f32 = { 0 },
  f32f64 = { 0, 1 },
  int = { 3, 4, 5, 6 },
}

-- Default AMP policy per family (op table `amp` overrides): what mx.amp does with an op
-- under float16/bfloat16 (MXNet's lists: safe in low precision, needs float32, or the
-- widest dtype of its inputs).
local AMP_FAMILY = { elemwise = "widest", reduce = "fp32", softmax = "fp32", linalg = "safe",
  nn = "safe", shape = "safe", indexing = "safe", creation = "safe", random = "fp32",
  optimizer = "fp32", autograd = "safe", image = "fp32", amp = "safe", quantize = "fp32" }
M.amp_codes = { safe = 0, fp32 = 1, widest = 2, target = 3 }

-- Inputs promoted to one dtype before the kernel, by inference kind (op table `promote`
-- overrides: a list of 1-based input positions, float = true for float promotion).
local PROMOTE = {
  broadcast = { 1, 2 }, where = { 2, 3 },
  same_float = { 1, float = true }, reduce_float = { 1, float = true },
  norm = { 1, float = true }, softmax = { 1, float = true },
}

-- The backends a kernel can be declared for, in registry order (internal.h MX_BACKEND_*).
-- ref is always there (mx_ref_<ref or name>); the others are op table fields.
M.backends = { "ref", "cpu", "dnnl", "cuda" }
M.backend_codes = { ref = "MX_BACKEND_REF", cpu = "MX_BACKEND_CPU", dnnl = "MX_BACKEND_DNNL",
  cuda = "MX_BACKEND_CUDA" }
-- Input layouts a kernel may take besides row-major (mx.h MX_LAYOUT_*).
local LAYOUT_CODES = { onednn = "MX_LAYOUT_ONEDNN", winograd = "MX_LAYOUT_WINOGRAD" }
local KERNEL_FIELDS = { [1] = true, supports = true, out_layout = true, layouts = true,
  choose_out = true, prepack = true }

-- kernels_of(op)[backend] = { name, supports, out_layout, layouts, choose_out, prepack } for
-- every backend the op declares: `cpu = true` (a kernel named after the op), `cpu = "name"`
-- (a kernel shared by several ops), or `dnnl = { "name", supports = true, out_layout = true,
-- layouts = { "onednn" }, choose_out = true, prepack = true }`. The C names follow:
-- mx_<backend>_<name>, mx_<backend>_<name>_supports, mx_<backend>_<name>_out_layout,
-- mx_<backend>_<name>_prepack (supports = "conv": the shared mx_<backend>_conv_supports).
-- Computed when asked (the generator, docs, specs), not kept on the op: the run-time
-- table stays small, as Lua's GC walks it every cycle.
function M.kernels_of(op, where)
  where = where or ("op " .. op.name)
  local ks = { ref = { name = op.ref or op.name, layouts = {} } }
  for _, b in ipairs(M.backends) do
    local v = op[b]
    if b ~= "ref" and v then
      if v == true then v = { op.name } elseif type(v) == "string" then v = { v } end
      assert(type(v) == "table", where .. ": " .. b .. " must be true, a kernel name or a table")
      for k in pairs(v) do
        assert(KERNEL_FIELDS[k], where .. ": " .. b .. " kernel: unknown field " .. tostring(k))
      end
      local name = v[1] or op.name
      assert(type(name) == "string" and name:match("^[%a_][%w_]*$"), where .. ": " .. b .. " kernel name")
      for _, l in ipairs(v.layouts or {}) do
        assert(LAYOUT_CODES[l], where .. ": " .. b .. " kernel: unknown layout " .. tostring(l))
      end
      assert(not v.choose_out or v.out_layout, where .. ": choose_out needs out_layout")
      -- supports / out_layout: true (the kernel's name) or the base name of a function
      -- several kernels share
      local function fn(f)
        if f == true then return name end
        assert(f == nil or f == false or (type(f) == "string" and f:match("^[%a_][%w_]*$")),
          where .. ": " .. b .. " kernel: supports/out_layout/prepack must be true or a name")
        return f or false
      end
      ks[b] = { name = name, supports = fn(v.supports), out_layout = fn(v.out_layout),
        prepack = fn(v.prepack), layouts = v.layouts or {}, choose_out = v.choose_out or false }
    end
  end
  return ks
end

-- Storage types (mx.h MX_STYPE_*), by MXNet's names and its kernels' abbreviations.
M.stype_codes = { default = 0, dns = 0, row_sparse = 1, rsp = 1, csr = 2 }
local STYPE_ABBR = { [0] = "dns", "rsp", "csr" }
local STK_FIELDS = { [1] = true, kernel = true, cpu = true, applies = true, doc = true }

-- An op's storage-type kernels (its `stypes` list, or what a family's STYPES table adds):
-- each entry "in1, in2 -> out1" in MXNet's storage type names (default/dns, row_sparse/
-- rsp, csr), the kernels' base name (default <op>_<input abbreviations>: dot_csr_dns;
-- mx_ref_<name> always, mx_cpu_<name> with cpu = true or { supports = true }) and
-- `applies`, the name of a C predicate mx_stype_applies_<name>(params) in core/ops/
-- (dot's transpose_a picks the row_sparse result). Normalised into op.stk.
local function normalize_stypes(op, where)
  op.stk = {}
  for i, e in ipairs(op.stypes or {}) do
    local w = where .. ": stypes entry " .. i
    assert(type(e) == "table" and type(e[1]) == "string", w .. ": needs a signature string")
    for k in pairs(e) do assert(STK_FIELDS[k], w .. ": unknown field " .. tostring(k)) end
    local lhs, rhs = e[1]:match("^%s*(.-)%s*%->%s*(.-)%s*$")
    assert(lhs, w .. ": signature must read 'in, ... -> out, ...'")
    local ins, outs = {}, {}
    for t in lhs:gmatch("[^,%s]+") do
      ins[#ins + 1] = assert(M.stype_codes[t], w .. ": unknown storage type " .. t)
    end
    for t in rhs:gmatch("[^,%s]+") do
      outs[#outs + 1] = assert(M.stype_codes[t], w .. ": unknown storage type " .. t)
    end
    assert(not op.variadic and #ins == #op.inputs, w .. ": needs one storage type per input")
    assert(#outs == #op.outputs and not op.num_outputs, w .. ": needs one per output")
    assert(#ins <= 8 and #outs <= 4, w .. ": at most 8 inputs and 4 outputs")
    assert(#op.aux == 0, w .. ": ops with auxiliary inputs take no storage-type kernels")
    local abbr = {}
    for j, c in ipairs(ins) do abbr[j] = STYPE_ABBR[c] end
    local name = e.kernel or (op.name .. "_" .. table.concat(abbr, "_"))
    assert(name:match("^[%a_][%w_]*$"), w .. ": bad kernel name")
    local cpu = e.cpu
    if cpu == true then cpu = {} end
    assert(cpu == nil or type(cpu) == "table", w .. ": cpu must be true or { supports = true }")
    local sup = cpu and cpu.supports
    if sup == true then sup = name end
    local dense = true
    for _, c in ipairs(ins) do if c ~= 0 then dense = false end end
    if dense then op.stk_dense = true end
    assert(e.applies == nil or (type(e.applies) == "string" and e.applies:match("^[%a_][%w_]*$")),
      w .. ": applies must be a C predicate's name")
    op.stk[i] = { ins = ins, outs = outs, name = name, cpu = cpu ~= nil, supports = sup or false,
      applies = e.applies or false, sig = e[1], doc = e.doc }
  end
end
M.stype_names = { [0] = "default", "row_sparse", "csr" }

-- Validates and normalises the table; returns the list of ops in table order.
-- Input names ending in "?" are optional (fully_connected's bias): C callers pass
-- between nin_min and nin inputs.
function M.normalize(tab)
  local seen = {}
  for i, op in ipairs(tab) do
    local where = "op table entry " .. i .. " (" .. tostring(op.name) .. ")"
    assert(type(op.name) == "string" and op.name:match("^[%a_][%w_]*$"), where .. ": bad name")
    assert(not seen[op.name], where .. ": duplicate name")
    seen[op.name] = true
    op.id = i - 1
    op.inputs = op.inputs or {}
    op.optional_inputs = {}
    local nmin = 0
    for j, name in ipairs(op.inputs) do
      local base, q = name:match("^([%w_]+)(%??)$")
      assert(base, where .. ": bad input name " .. tostring(name))
      op.inputs[j] = base
      if q == "?" then op.optional_inputs[j] = true
      else
        assert(nmin == j - 1, where .. ": optional inputs must come last")
        nmin = j
      end
    end
    op.aux = op.aux or {}
    for _, name in ipairs(op.aux) do op.inputs[#op.inputs + 1] = name end
    op.outputs = op.outputs or { "out" }
    op.params = op.params or {}
    op.nin = op.variadic and -1 or #op.inputs
    op.nin_min = op.variadic and 1 or nmin + #op.aux
    assert(type(op.infer) == "string", where .. ": infer missing")
    assert(op.doc, where .. ": doc missing")
    assert(op.grad or op.nondiff, where .. ": needs grad or nondiff")
    assert(op.family, where .. ": family missing (kernel/spec file base name)")
    op.ref = op.ref or op.name
    local ds = op.dtypes or "all"
    op.dtype_list = type(ds) == "table" and ds or assert(M.dtype_sets[ds], where .. ": dtypes")
    op.mxnet = op.mxnet or {}
    op.amp = op.amp or AMP_FAMILY[op.family] or "safe"
    assert(M.amp_codes[op.amp], where .. ": amp must be safe, fp32 or widest")
    op.promote = op.promote or PROMOTE[op.infer]
    for _, p in ipairs(op.params) do
      p.name, p.type, p.default = p[1], p[2], p[3]
      assert(M.ptypes[p.type], where .. ": param " .. tostring(p.name) .. " has unknown type")
      if p.type == "enum" then assert(p.values, where .. ": enum " .. p.name .. " needs values") end
      p.optional = p.default == nil
    end
    if op.num_outputs then -- the output count comes from an int param (split)
      local found
      for j, p in ipairs(op.params) do
        if p.name == op.num_outputs then found = j - 1 end
      end
      assert(found and op.params[found + 1].type == "int", where .. ": num_outputs names no int param")
      op.nout_param = found
      assert(not op.stypes, where .. ": ops with a counted output take no storage-type kernels")
    elseif op.nout then -- the count is a C function of the params (topk's ret_typ)
      assert(type(op.nout) == "string" and op.nout:match("^[%a_][%w_]*$"), where .. ": nout")
      local by = op.nout_by or (op.params[1] and op.params[1].name)
      for j, p in ipairs(op.params) do
        if p.name == by then op.nout_param = j - 1 end
      end
      -- the wrappers (make_counted, help, docs) treat it as counted, naming that param
      assert(op.nout_param, where .. ": nout_by names no param")
      op.num_outputs = by
    end
    normalize_stypes(op, where)
  end
  return tab
end

-- The param struct text, shared by C and FFI. Ops with ctx=true start with the
-- device fields (dispatch.c reads them at offset 0).
function M.struct_text(op)
  if #op.params == 0 and not op.ctx then return nil end
  local f = { "struct mx_params_" .. op.name .. " {" }
  if op.ctx then f[#f + 1] = "  int32_t dev_type; int32_t dev_id;" end
  for _, p in ipairs(op.params) do
    local t = M.ptypes[p.type]
    if p.optional and not t.tuple then f[#f + 1] = "  bool has_" .. p.name .. ";" end
    f[#f + 1] = "  " .. t.ctype .. " " .. p.name .. ";"
  end
  f[#f + 1] = "};"
  return table.concat(f, "\n")
end

function M.cdef_text(ops)
  local out = {}
  for _, op in ipairs(ops) do
    local s = M.struct_text(op)
    if s then out[#out + 1] = s end
  end
  return table.concat(out, "\n")
end

-- C constants for enum values: MX_<OP>_<PARAM>_<VALUE> (kernels test these, not
-- magic integers). Not part of the FFI text (no behaviour, and enums can't be redefined).
function M.enum_text(ops)
  local out = {}
  for _, op in ipairs(ops) do
    for _, p in ipairs(op.params) do
      if p.type == "enum" then
        local items = {}
        for i, v in ipairs(p.values) do
          items[#items + 1] = string.format("MX_%s_%s_%s = %d", op.name:upper(), p.name:upper(),
            v:upper():gsub("[^%w]", "_"), i - 1)
        end
        out[#out + 1] = "enum { " .. table.concat(items, ", ") .. " };"
      end
    end
  end
  return table.concat(out, "\n")
end

-- FNV-1a 64 of the text both sides derive (op names in order + struct text), as a
-- decimal string (Lua numbers cannot hold 64 bits): libmx reports it, mx.core.lib checks it.
function M.table_hash(ops)
  local names = {}
  for _, op in ipairs(ops) do names[#names + 1] = op.name end
  local text = table.concat(names, ",") .. "\n" .. M.cdef_text(ops)
  local ok, bit = pcall(require, "bit")
  if not ok then error("mx.core.opgen: needs LuaJIT's bit module") end
  -- (hi * 2^32 + lo) * (PH * 2^32 + PL) mod 2^64, in doubles: every product < 2^53
  local hi, lo = 0xcbf29ce4, 0x84222325
  local PH, PL = 0x100, 0x1b3 -- FNV prime 0x100000001b3
  for i = 1, #text do
    lo = bit.bxor(lo, text:byte(i))
    if lo < 0 then lo = lo + 2 ^ 32 end
    local p = lo * PL
    local carry = math.floor(p / 2 ^ 32)
    hi = (hi * PL + lo * PH + carry) % 2 ^ 32
    lo = p % 2 ^ 32
  end
  return string.format("0x%08x%08xULL", hi, lo), hi, lo
end

local function mask(list)
  local m = 0
  for _, d in ipairs(list) do m = m + 2 ^ d end
  return string.format("0x%xu", m)
end

-- MXNet's string form of a Lua default (0-based axes and indices, as symbol JSON has
-- them); nil for none.
local function axis_str(v) return tostring(v > 0 and v - 1 or v) end
local function mx_default(p)
  local v = p.default
  if v == nil then return nil end
  local t = p.type
  if p.index then -- slice bounds: 1-based inclusive in Lua
    if type(v) == "table" then return nil end
    if p.index == "begin" then return tostring(v > 0 and v - 1 or v) end
    return nil
  end
  if t == "bool" then return v and "True" or "False" end
  if t == "int" then return string.format("%d", v) end
  if t == "float" then return string.format("%.17g", v) end
  if t == "enum" then return v end
  if t == "dtype" then
    local names = { [0] = "float32", "float64", "float16", "uint8", "int32", "int8", "int64",
      "bool", "int16", [12] = "bfloat16" }
    return names[v] or tostring(v)
  end
  if t == "axis" then return axis_str(v) end
  if type(v) == "table" then
    local items = {}
    for i, x in ipairs(v) do
      if t == "axes" then items[i] = axis_str(x)
      elseif t == "floats" then items[i] = string.format("%.17g", x)
      else items[i] = string.format("%d", x) end
    end
    -- a float list as MXNet writes a one-tuple, "(1,)"
    return "(" .. table.concat(items, ", ") .. ((t == "floats" and #items == 1) and ",)" or ")")
  end
  return tostring(v)
end
M.mx_default = mx_default

local function cstr(s) return s and ('"' .. s:gsub('\\', '\\\\'):gsub('"', '\\"') .. '"') or "NULL" end

-- The generated C: param structs and enum constants (header) and the registry (source).
function M.c_header(ops)
  return "/* generated by tools/gen_ops.lua from the core/ops tables: do not edit */\n"
    .. "#ifndef MX_OPS_GEN_H\n#define MX_OPS_GEN_H\n#include \"mx.h\"\n"
    .. M.cdef_text(ops) .. "\n" .. M.enum_text(ops) .. "\n#endif\n"
end

-- The C names of a declared kernel (kernels_of).
local function kname(b, k) return "mx_" .. b .. "_" .. k.name end

-- Every kernel, supports and out-layout function the table declares, each once (shared
-- kernels serve several ops): the prototypes kernels/ and libmx_cuda compile against.
function M.kernel_header(ops)
  local L = { "/* generated by tools/gen_ops.lua from the core/ops tables: do not edit */",
    "#ifndef MX_KERNELS_GEN_H", "#define MX_KERNELS_GEN_H", '#include "internal.h"',
    "#ifdef __cplusplus", 'extern "C" {', "#endif" }
  local seen = {}
  local KARGS = "(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);"
  local SARGS = "(const mx_op_def *, const void *, const mx_op_info *, int, const mx_desc *, int, "
    .. "const mx_desc *, const char **);"
  local OARGS = "(const mx_op_def *, const void *, const mx_op_info *, int, mx_tensor *const *, int, "
    .. "const mx_desc *, mx_tensor **);"
  local PARGS = "(const mx_op_def *, const void *, const mx_op_info *, int, mx_tensor *const *, int, "
    .. "mx_tensor **);"
  local function add(line)
    if not seen[line] then seen[line] = true; L[#L + 1] = line end
  end
  for _, b in ipairs(M.backends) do
    if b == "dnnl" then L[#L + 1] = "#ifdef MX_HAVE_ONEDNN" end
    for _, op in ipairs(ops) do
      local k = M.kernels_of(op)[b]
      if k then
        add("int " .. kname(b, k) .. KARGS)
        if k.supports then add("bool mx_" .. b .. "_" .. k.supports .. "_supports" .. SARGS) end
        if k.out_layout then
          add("int mx_" .. b .. "_" .. k.out_layout .. "_out_layout" .. OARGS)
        end
        if k.prepack then add("int mx_" .. b .. "_" .. k.prepack .. "_prepack" .. PARGS) end
      end
    end
    if b == "dnnl" then L[#L + 1] = "#endif" end
  end
  for _, op in ipairs(ops) do -- the storage-type kernels (ref and cpu)
    for _, e in ipairs(op.stk or {}) do
      add("int mx_ref_" .. e.name .. KARGS)
      if e.cpu then add("int mx_cpu_" .. e.name .. KARGS) end
      if e.supports then add("bool mx_cpu_" .. e.supports .. "_supports" .. SARGS) end
    end
  end
  L[#L + 1] = "#ifdef __cplusplus\n}\n#endif\n#endif"
  return table.concat(L, "\n") .. "\n"
end

-- One registration line per declared kernel of backend b: `reg(op, b, {run, supports,
-- out_layout, prepack, layouts})`, op given as an id (libmx's own table) or found by name (a
-- library loaded later, which may come from another build: mx_op_find checks).
local function register_lines(ops, b, by_name)
  local L = {}
  for i, op in ipairs(ops) do -- i - 1: the op's index in the mx_ops[] these ops make
    local k = M.kernels_of(op)[b]
    if k then
      local n = kname(b, k)
      local lay = { "1u" }
      for _, l in ipairs(k.layouts) do lay[#lay + 1] = "1u << " .. LAYOUT_CODES[l] end
      if k.choose_out then lay[#lay + 1] = "MX_LAYOUTS_CHOOSE_OUT" end
      L[#L + 1] = string.format('  REG(%s, %s, %s, %s, %s, %s, %s);',
        by_name and ('"' .. op.name .. '"') or tostring(i - 1), M.backend_codes[b], n,
        k.supports and ("mx_" .. b .. "_" .. k.supports .. "_supports") or "NULL",
        k.out_layout and ("mx_" .. b .. "_" .. k.out_layout .. "_out_layout") or "NULL",
        k.prepack and ("mx_" .. b .. "_" .. k.prepack .. "_prepack") or "NULL",
        table.concat(lay, " | "))
    end
  end
  return L
end

function M.c_source(ops)
  local L = { "/* generated by tools/gen_ops.lua from the core/ops tables: do not edit */",
    '#include "internal.h"', '#include "mx_ops_gen.h"', '#include "mx_kernels_gen.h"',
    "#include <stddef.h>", "" }
  local declared = {}
  for _, op in ipairs(ops) do
    if op.nout and not declared["nout" .. op.nout] then
      declared["nout" .. op.nout] = true
      L[#L + 1] = "int mx_nout_" .. op.nout .. "(const void *);"
    end
    if op.inplace_fn and not declared["inplace" .. op.inplace_fn] then
      declared["inplace" .. op.inplace_fn] = true
      L[#L + 1] = "int mx_inplace_" .. op.inplace_fn .. "(const void *, int, int);"
    end
    if not declared["infer" .. op.infer] then
      declared["infer" .. op.infer] = true
      L[#L + 1] = "int mx_infer_" .. op.infer .. "(const mx_op_def *, const void *, int, "
        .. "mx_desc *const *, int, mx_desc *, mx_op_info *);"
    end
    if #op.params > 0 then
      for _, p in ipairs(op.params) do
        if p.type == "enum" then
          local vs = {}
          for i, v in ipairs(p.values) do vs[i] = cstr(v) end
          vs[#vs + 1] = "NULL"
          L[#L + 1] = string.format("static const char *const enum_%s_%s[] = {%s};", op.name, p.name,
            table.concat(vs, ", "))
        end
      end
      L[#L + 1] = "static const mx_param_def params_" .. op.name .. "[] = {"
      for _, p in ipairs(op.params) do
        local t = M.ptypes[p.type]
        local has = (p.optional and not t.tuple)
            and ("offsetof(struct mx_params_" .. op.name .. ", has_" .. p.name .. ")") or "0"
        L[#L + 1] = string.format('  {"%s", %s, offsetof(struct mx_params_%s, %s), %s, %s, %s, %s, %s},',
          p.name, t.code, op.name, p.name, p.optional and "true" or "false", has,
          cstr(p.mxnet or p.name), cstr(mx_default(p)),
          p.type == "enum" and ("enum_" .. op.name .. "_" .. p.name) or "NULL")
      end
      L[#L + 1] = "};"
    end
    if #op.mxnet > 0 then
      local ns = {}
      for i, n in ipairs(op.mxnet) do ns[i] = cstr(n) end
      ns[#ns + 1] = "NULL"
      L[#L + 1] = "static const char *const mxnet_" .. op.name .. "[] = {" .. table.concat(ns, ", ") .. "};"
    end
  end
  -- storage-type kernel tables (their kernel slots filled by the registration below)
  for _, op in ipairs(ops) do
    if #op.stk > 0 then
      local rows = {}
      for _, e in ipairs(op.stk) do
        if e.applies and not declared["applies" .. e.applies] then
          declared["applies" .. e.applies] = true
          L[#L + 1] = "bool mx_stype_applies_" .. e.applies .. "(const void *, int, const mx_desc *);"
        end
        rows[#rows + 1] = string.format('  {.in = {%s}, .out = {%s}, .applies = %s, .name = "%s"},',
          table.concat(e.ins, ", "), table.concat(e.outs, ", "),
          e.applies and ("mx_stype_applies_" .. e.applies) or "NULL", e.name)
      end
      L[#L + 1] = "static mx_stype_kernel stk_" .. op.name .. "[] = {"
      for _, r in ipairs(rows) do L[#L + 1] = r end
      L[#L + 1] = "};"
    end
  end
  -- the kernel slots stay empty here: every backend registers through mx_kernel_register
  L[#L + 1] = "mx_op_def mx_ops[] = {"
  for _, op in ipairs(ops) do
    local has_struct = M.struct_text(op) ~= nil
    local flags = {}
    if op.variadic then flags[#flags + 1] = "MX_OPF_VARIADIC" end
    if op.ctx then flags[#flags + 1] = "MX_OPF_CREATION" end
    if op.random then flags[#flags + 1] = "MX_OPF_RNG" end
    if op.nondiff then flags[#flags + 1] = "MX_OPF_NONDIFF" end
    if op.partial then flags[#flags + 1] = "MX_OPF_PARTIAL" end
    if op.half == "all" then flags[#flags + 1] = "MX_OPF_HALF_ALL" end
    if op.half == "out" then flags[#flags + 1] = "MX_OPF_HALF_OUT" end
    assert(op.half == nil or op.half == "all" or op.half == "out",
      op.name .. ": half must be \"all\" or \"out\"")
    local pm, pf = 0, false
    if op.promote then
      for _, j in ipairs(op.promote) do pm = pm + 2 ^ (j - 1) end
      pf = op.promote.float or false
    end
    local so = 0
    for _, j in ipairs(op.shape_only or {}) do so = so + 2 ^ (j - 1) end
    local ip = { -1, -1, -1, -1 }
    for _, pair in ipairs(op.inplace or {}) do ip[pair[1]] = pair[2] - 1 end
    L[#L + 1] = string.format(
      '  {.name = "%s", .nin = %d, .nout = %d, .nin_min = %d, .params_size = %s, .nparams = %d, '
        .. '.params = %s, .dtype_mask = %s, .flags = %s, .promote = 0x%xu, .promote_float = %s, '
        .. '.naux = %d, .nout_param = %d, .inplace = {%d, %d, %d, %d}, .amp = %d, '
        .. '.mxnet_names = %s, .infer = mx_infer_%s, .nout_fn = %s, .shape_only = 0x%xu, '
        .. '.nstk = %d, .stk = %s, .stk_dense = %s, .inplace_fn = %s},',
      op.name, op.nin, op.num_outputs and -1 or #op.outputs, op.nin_min,
      has_struct and ("sizeof(struct mx_params_" .. op.name .. ")") or "0",
      #op.params, #op.params > 0 and ("params_" .. op.name) or "NULL",
      mask(op.dtype_list), #flags > 0 and table.concat(flags, " | ") or "0", pm,
      pf and "true" or "false", #op.aux, op.nout_param or -1, ip[1], ip[2], ip[3], ip[4],
      M.amp_codes[op.amp], #op.mxnet > 0 and ("mxnet_" .. op.name) or "NULL",
      op.infer, op.nout and ("mx_nout_" .. op.nout) or "NULL", so,
      #op.stk, #op.stk > 0 and ("stk_" .. op.name) or "NULL", op.stk_dense and "true" or "false",
      op.inplace_fn and ("mx_inplace_" .. op.inplace_fn) or "NULL")
  end
  L[#L + 1] = "};"
  L[#L + 1] = "const int mx_num_ops = " .. #ops .. ";"
  L[#L + 1] = "const uint64_t mx_ops_hash = " .. (M.table_hash(ops)) .. ";"
  -- libmx's own backends, registered once when the library loads
  L[#L + 1] = ""
  L[#L + 1] = "#define REG(op, b, run, sup, lay, pre, mask) \\"
  L[#L + 1] = "  mx_kernel_register(op, b, &(const mx_kernel_entry){run, sup, lay, pre, mask})"
  L[#L + 1] = "#define STK(op, i, b, run, sup) \\"
  L[#L + 1] = "  mx_stype_kernel_register(op, i, b, &(const mx_kernel_entry){run, sup, NULL, NULL, 1u})"
  L[#L + 1] = "__attribute__((constructor)) static void register_builtin_kernels(void) {"
  for _, b in ipairs({ "ref", "cpu", "dnnl" }) do
    if b == "dnnl" then L[#L + 1] = "#ifdef MX_HAVE_ONEDNN" end
    for _, line in ipairs(register_lines(ops, b, false)) do L[#L + 1] = line end
    if b == "dnnl" then L[#L + 1] = "#endif" end
  end
  for i, op in ipairs(ops) do
    for j, e in ipairs(op.stk) do
      L[#L + 1] = string.format("  STK(%d, %d, MX_BACKEND_REF, mx_ref_%s, NULL);", i - 1, j - 1, e.name)
      if e.cpu then
        L[#L + 1] = string.format("  STK(%d, %d, MX_BACKEND_CPU, mx_cpu_%s, %s);", i - 1, j - 1, e.name,
          e.supports and ("mx_cpu_" .. e.supports .. "_supports") or "NULL")
      end
    end
  end
  L[#L + 1] = "}"
  return table.concat(L, "\n") .. "\n"
end

-- libmx_cuda's registration: its kernels into libmx's registry, by op name, through the
-- same mx_kernel_register as libmx's own; returns how many (libmx calls it at load).
function M.cuda_source(ops)
  local L = { "/* generated by tools/gen_ops.lua from the core/ops tables: do not edit */",
    '#include "mx_kernels_gen.h"', "",
    "#define REG(name, b, run, sup, lay, pre, mask) \\",
    "  n += mx_kernel_register(mx_op_find(name), b, &(const mx_kernel_entry){run, sup, lay, pre, "
      .. "mask}) == MX_OK",
    "int mx_cuda_register_kernels(void) {", "  int n = 0;" }
  for _, line in ipairs(register_lines(ops, "cuda", true)) do L[#L + 1] = line end
  L[#L + 1] = "  return n;"
  L[#L + 1] = "}"
  return table.concat(L, "\n") .. "\n"
end

return M
