-- mx.nd.ndio — mx.nd.save / mx.nd.load / mx.nd.load_frombuffer: MXNet's NDArray list
-- files (.params, written as V2), NumPy .npy and .npz, and by extension safetensors
-- (mx.nd.safetensors). Installed into mx.nd by `require("mx.nd.ndio")(nd)` at the end of
-- lua/mx/nd.lua. Formats and policies: docs/file-formats.md; the parsing and all checks
-- live in core/src/ndfile*.c and core/src/safetensors.c.
local lib = require("mx.core.lib")
local st = require("mx.nd.safetensors")

local ffi, C = lib.ffi, lib.C
local ffi_string = ffi.string
local type, pairs, tostring = type, pairs, tostring

local handles_t = ffi.typeof("mx_tensor*[?]")
local names_t = ffi.typeof("const char*[?]")

return function(nd)
  local is_tensor, wrap = nd.is_tensor, nd._wrap

  -- Split the Lua value into a list of tensors and (for a dict) sorted names.
  -- Returns list, names (or nil), or nil, message.
  local function collect(data)
    if is_tensor(data) then return { data }, nil end
    if type(data) ~= "table" then
      return nil, "data must be a tensor, a list of tensors or a table name -> tensor, got "
        .. type(data)
    end
    local n, count, keys = #data, 0, {}
    for k in pairs(data) do
      count = count + 1
      if type(k) == "string" then
        if k:find("\0", 1, true) then
          return nil, "array name " .. string.format("%q", k) .. " contains a NUL byte"
        end
        keys[#keys + 1] = k
      elseif not (type(k) == "number" and k % 1 == 0 and k >= 1 and k <= n) then
        return nil, "keys must be names (strings) or list positions 1..n, got "
          .. type(k) .. " " .. tostring(k)
      end
    end
    if #keys > 0 and #keys ~= count then
      return nil, "cannot mix named and positional arrays in one file"
    end
    if #keys == 0 and count ~= n then return nil, "the list of tensors has holes" end
    local list = {}
    if #keys > 0 then
      table.sort(keys) -- Lua tables have no order: sorted names give reproducible files
      for i, k in ipairs(keys) do
        list[i] = data[k]
        if not is_tensor(list[i]) then
          return nil, "value for name '" .. k .. "' must be a tensor, got " .. type(list[i])
        end
      end
      return list, keys
    end
    for i = 1, n do
      list[i] = data[i]
      if not is_tensor(list[i]) then
        return nil, "element " .. i .. " must be a tensor, got " .. type(list[i])
      end
    end
    return list, nil
  end

  local function is_safetensors(path) return path:lower():match("%.safetensors$") ~= nil end
  -- PyTorch's torch.save files (state_dicts): core/src/torchfile.c
  local function is_torch(path)
    local ext = path:lower():match("%.(%w+)$")
    return ext == "pt" or ext == "pth"
  end

  -- mx.nd.save(path, tensor | {tensor, ...} | {name = tensor, ...}, {metadata=}): MXNet's
  -- .params format (V2; V3 when a tensor is 0-d or empty), or safetensors when path ends
  -- in .safetensors (a name table; metadata: string -> string, its __metadata__), written
  -- atomically. A sync point: waits for pending writes to every tensor. GPU tensors are
  -- saved from a host copy.
  function nd.save(path, data, opts)
    if type(path) ~= "string" then
      error("mx.nd.save: path must be a string, got " .. type(path), 2)
    end
    if opts ~= nil and type(opts) ~= "table" then
      error("mx.nd.save: options must be a table, got " .. type(opts), 2)
    end
    for k in pairs(opts or {}) do
      if k ~= "metadata" then error("mx.nd.save: unknown option '" .. tostring(k) .. "'", 2) end
    end
    local list, names = collect(data)
    if not list then error("mx.nd.save: " .. path .. ": " .. names, 2) end
    if is_safetensors(path) then
      st.save(path, list, names, opts and opts.metadata, 2)
      return
    end
    if opts and opts.metadata ~= nil then
      error("mx.nd.save: " .. path .. ": metadata is kept by safetensors files only", 2)
    end
    local n = #list
    local h = handles_t(n > 0 and n or 1)
    for i = 1, n do h[i - 1] = list[i].h end
    local cn = nil
    if names then
      cn = names_t(n)
      for i = 1, n do cn[i - 1] = names[i] end -- `names` keeps the strings alive
    end
    if C.mx_nd_save(path, n, h, cn) ~= 0 then error(ffi_string(C.mx_last_error()), 2) end
  end

  -- Turn the C result into a list (no names) or a name -> tensor table.
  local function collect_result(pn, parr, pnames)
    local n, arr, names = pn[0], parr[0], pnames[0]
    local out = {}
    for i = 0, n - 1 do
      local t = wrap(arr[i])
      if names ~= nil then
        out[ffi_string(names[i])] = t
        C.mx_free(names[i])
      else
        out[i + 1] = t
      end
    end
    if names ~= nil then C.mx_free(names) end
    C.mx_free(arr)
    return out
  end

  -- mx.nd.load(path, {mmap=true}) -> {tensor, ...} for a list file or a .npy,
  -- {name = tensor, ...} for a dict file, a .npz, a PyTorch state_dict (.pt/.pth: a
  -- restricted unpickler, never running code from the file) or a safetensors file (then
  -- also its metadata table, a second result). Tensors load on the CPU; safetensors tensors are
  -- backed by a private mapping of the file (copy-on-write; mmap=false copies them).
  -- Malformed files raise an error naming the file, the array and what is wrong.
  function nd.load(path, opts)
    if type(path) ~= "string" then
      error("mx.nd.load: path must be a string, got " .. type(path), 2)
    end
    if opts ~= nil and type(opts) ~= "table" then
      error("mx.nd.load: options must be a table, got " .. type(opts), 2)
    end
    for k in pairs(opts or {}) do
      if k ~= "mmap" then error("mx.nd.load: unknown option '" .. tostring(k) .. "'", 2) end
    end
    if is_safetensors(path) then
      local t, meta = st.load(wrap, path, not (opts and opts.mmap == false), 2)
      return t, meta
    end
    local pn, parr, pnames = ffi.new("int[1]"), ffi.new("mx_tensor**[1]"), ffi.new("char**[1]")
    if is_torch(path) then
      if C.mx_torch_load(path, pn, parr, pnames) ~= 0 then error(ffi_string(C.mx_last_error()), 2) end
      local r = collect_result(pn, parr, pnames)
      return r
    end
    if C.mx_nd_load(path, pn, parr, pnames) ~= 0 then
      error(ffi_string(C.mx_last_error()), 2)
    end
    local r = collect_result(pn, parr, pnames)
    return r
  end

  -- mx.nd.load_frombuffer(bytes): the same from a Lua string holding a file's bytes.
  function nd.load_frombuffer(buf)
    if type(buf) ~= "string" then
      error("mx.nd.load_frombuffer: expected a string of bytes, got " .. type(buf), 2)
    end
    local pn, parr, pnames = ffi.new("int[1]"), ffi.new("mx_tensor**[1]"), ffi.new("char**[1]")
    if C.mx_nd_load_bytes(buf, #buf, pn, parr, pnames) ~= 0 then
      -- the core names its loader (mx.nd.load); the user called load_frombuffer
      local msg = ffi_string(C.mx_last_error()):gsub("^mx%.nd%.load: ", "mx.nd.load_frombuffer: ")
      error(msg, 2)
    end
    local r = collect_result(pn, parr, pnames)
    return r
  end
end
