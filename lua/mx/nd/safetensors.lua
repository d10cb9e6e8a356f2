-- mx.nd.safetensors — safetensors files for mx.nd.load / mx.nd.save (lua/mx/nd/ndio.lua
-- dispatches `.safetensors` paths here). Parsing, checks, the zero-copy mapping and the
-- atomic write live in core/src/safetensors.c; docs/file-formats.md ("safetensors").
local lib = require("mx.core.lib")

local ffi, C = lib.ffi, lib.C
local ffi_string = ffi.string

local handles_t = ffi.typeof("mx_tensor*[?]")
local names_t = ffi.typeof("const char*[?]")

local M = {}

-- load(wrap, path, mmap) -> {name = tensor}, {key = value} (metadata, maybe empty).
-- mmap false: every tensor is a copy (the file may then change freely).
function M.load(wrap, path, mmap, level)
  local pn, parr, pnames = ffi.new("int[1]"), ffi.new("mx_tensor**[1]"), ffi.new("char**[1]")
  local pnm, pmeta = ffi.new("int[1]"), ffi.new("char**[1]")
  local flags = mmap == false and C.MX_SAFETENSORS_COPY or 0
  if C.mx_safetensors_load(path, flags, pn, parr, pnames, pnm, pmeta) ~= 0 then
    error(ffi_string(C.mx_last_error()), level + 1)
  end
  local out, meta = {}, {}
  local arr, names = parr[0], pnames[0]
  for i = 0, pn[0] - 1 do
    out[ffi_string(names[i])] = wrap(arr[i])
    C.mx_free(names[i])
  end
  C.mx_free(names)
  C.mx_free(arr)
  local m = pmeta[0]
  for i = 0, pnm[0] - 1 do
    meta[ffi_string(m[2 * i])] = ffi_string(m[2 * i + 1])
    C.mx_free(m[2 * i])
    C.mx_free(m[2 * i + 1])
  end
  C.mx_free(m)
  return out, meta
end

-- save(path, list, names, metadata): list/names from ndio's collect (names required).
function M.save(path, list, names, metadata, level)
  if not names and #list > 0 then
    error("mx.nd.save: " .. path .. ": a safetensors file maps names to tensors; give a table "
      .. "{name = tensor}", level + 1)
  end
  local keys, vals = {}, {}
  if metadata ~= nil then
    if type(metadata) ~= "table" then
      error("mx.nd.save: metadata must be a table of strings, got " .. type(metadata), level + 1)
    end
    for k, v in pairs(metadata) do
      if type(k) ~= "string" or type(v) ~= "string" then
        error("mx.nd.save: metadata keys and values must be strings, got " .. type(k) .. " = "
          .. type(v), level + 1)
      end
      keys[#keys + 1] = k
    end
    table.sort(keys)
    for i, k in ipairs(keys) do vals[i] = metadata[k] end
  end
  local n = #list
  local h = handles_t(n > 0 and n or 1)
  local cn = names_t(n > 0 and n or 1)
  for i = 1, n do h[i - 1], cn[i - 1] = list[i].h, names[i] end
  local nm = #keys
  local ck, cv = names_t(nm > 0 and nm or 1), names_t(nm > 0 and nm or 1)
  for i = 1, nm do ck[i - 1], cv[i - 1] = keys[i], vals[i] end
  if C.mx_safetensors_save(path, n, h, cn, nm, ck, cv) ~= 0 then
    error(ffi_string(C.mx_last_error()), level + 1)
  end
end

return M
