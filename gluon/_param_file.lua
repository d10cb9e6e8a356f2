-- gluon/_param_file.lua — parameter files: Block:save_parameters / load_parameters and
-- ParameterDict:save / load (MXNet's .params format through mx.nd.save / load).
--
-- save_parameters(path, {deduplicate=false, metadata=}): structural names ("0.weight"),
-- or safetensors for a path ending in .safetensors (metadata: its string -> string
-- __metadata__). A shared parameter is saved under each of its names, or with
-- deduplicate=true once, under the last of them (MXNet keeps the last name its reversed
-- dict sees); load_parameters accepts a file of either kind.
--
-- load_parameters(path, {ctx=, allow_missing=false, ignore_extra=false, cast_dtype=false,
-- dtype_source="current", name_map=}): .params, .npz or safetensors; names must match the
-- structural names (MXNet 2.0 files; 1.x "prefix_" names are not mapped) after name_map
-- (map_names below: for checkpoints other frameworks wrote); a shape mismatch names the
-- parameter and both shapes. A dtype that differs from the parameter's is an error unless cast_dtype:
-- then dtype_source "current" casts the saved values to the parameter's dtype,
-- "saved" casts the parameter to the file's dtype (MXNet 1.9). Everything is checked
-- before anything is loaded: an error leaves the block as it was.
--
-- ParameterDict:save(filename, strip_prefix="") / load(filename, ctx, allow_missing,
-- ignore_extra, restore_prefix="", cast_dtype, dtype_source) (MXNet 1.x's, positionally or
-- by name): the dict's names (strip_prefix removed: every name must start with it); load
-- matches file names with restore_prefix prepended, MXNet's "arg:"/"aux:" prefixes
-- (Module checkpoints) dropped.
local nd = require("mx.nd")
local class = require("mx.core.class")
local Pmod = require("mx.gluon.parameter")

local type, error, tostring, pairs, ipairs, pcall = type, error, tostring, pairs, ipairs, pcall
local check_opts = class.check_opts

local M = {}

-- the arrays to save: name -> data (every parameter initialized)
local function arrays_of(params, who, level, dedup, rename)
  local arrays, last = {}, {}
  local any = false
  for name, p in params:items() do
    if p._data == nil then
      error(string.format("%s: Parameter '%s' is not initialized%s", who, name,
        p._deferred and " (deferred: run a forward pass first)" or ""), level + 1)
    end
    last[p] = name
  end
  for name, p in params:items() do
    if not dedup or last[p] == name then
      -- a row_sparse Parameter: all its rows from its Trainer's store (MXNet's _reduce)
      arrays[rename and rename(name) or name] = p.stype ~= "default" and p:_reduce() or p._data
    end
    any = true
  end
  return arrays, any
end

function M.save_block(self, path, opts, level)
  opts = check_opts("save_parameters", opts, { deduplicate = true, metadata = true }, level)
  local dedup = opts.deduplicate
  if dedup ~= nil and type(dedup) ~= "boolean" then
    error("save_parameters: deduplicate must be a boolean, got " .. type(dedup), level)
  end
  local arrays, any = arrays_of(self:collect_params(), "save_parameters", level, dedup)
  if not any then error("save_parameters: the block has no parameters", level) end
  local ok, err = pcall(nd.save, path, arrays, opts.metadata and { metadata = opts.metadata })
  if not ok then error("save_parameters: " .. tostring(err), level) end
end

-- The checks and the load of `loaded` (name -> array) into params (a ParameterDict);
-- who names the function, what the container, in messages. Nothing is loaded unless
-- every check passes.
local function load_into(params, loaded, path, opts, who, what, level)
  local source = opts.dtype_source or "current"
  if source ~= "current" and source ~= "saved" then
    error(who .. ": dtype_source must be 'current' or 'saved', got " .. tostring(source), level)
  end
  if opts.ctx ~= nil then
    local ok, err = pcall(require("mx.context").parse, opts.ctx)
    if not ok then error(who .. ": ctx: " .. tostring(err), level) end
  end
  if not opts.allow_missing then
    -- a shared parameter is present when any of its names is (deduplicated files)
    local found = {}
    for name, p in params:items() do if loaded[name] ~= nil then found[p] = true end end
    for name, p in params:items() do
      if not found[p] then
        error(string.format("%s: Parameter '%s' is missing in file '%s' (pass "
          .. "{allow_missing=true} to keep its current value)", who, name, path), level)
      end
    end
  end
  local extra = {}
  for name in pairs(loaded) do extra[#extra + 1] = name end
  table.sort(extra)
  for _, name in ipairs(extra) do
    if params[name] == nil and not opts.ignore_extra then
      error(string.format("%s: Parameter '%s' loaded from file '%s' is not present "
        .. "in this %s (pass {ignore_extra=true} to skip it)", who, name, path, what), level)
    end
  end
  for name, p in params:items() do
    local v = loaded[name]
    if v ~= nil then
      local s = v:shape()
      local ok2 = p.shape == nil or #p.shape == 0 and #s == 0 or #s == #p.shape
      if ok2 and p.shape then
        for i = 1, #s do if p.shape[i] > 0 and p.shape[i] ~= s[i] then ok2 = false end end
      end
      if not ok2 then
        error(string.format("%s: shape mismatch for Parameter '%s': the %s expects %s, the file "
          .. "'%s' has %s", who, name, what, Pmod.shape_str(p.shape), path, Pmod.shape_str(s)),
          level)
      end
      if v:dtype() ~= p.dtype and not opts.cast_dtype then
        error(string.format("%s: dtype mismatch for Parameter '%s': the %s expects %s, the file "
          .. "'%s' has %s (pass {cast_dtype=true} to cast, with dtype_source='current' or "
          .. "'saved')", who, name, what, p.dtype, path, v:dtype()), level)
      end
    end
  end
  for name, p in params:items() do
    local v = loaded[name]
    if v ~= nil then
      if v:dtype() ~= p.dtype then
        if source == "saved" then p:cast(v:dtype()) else v = v:to(nil, p.dtype) end
      end
      if opts.ctx then v = v:to(opts.ctx) end
      p:set_data(v)
    end
  end
end

local function read(path, who, level)
  if type(path) ~= "string" then
    error(who .. ": path must be a string, got " .. type(path), level + 1)
  end
  local ok, loaded = pcall(nd.load, path)
  if not ok then error(who .. ": " .. tostring(loaded), level + 1) end
  if loaded[1] ~= nil then
    error(who .. ": " .. path .. " holds an unnamed list of arrays; parameter files "
      .. "map names to arrays", level + 1)
  end
  return loaded
end

local LOAD_OPTS = { ctx = true, allow_missing = true, ignore_extra = true, cast_dtype = true,
  dtype_source = true, name_map = true }

-- The file's names as the block's: name_map is a table file name -> parameter name
-- (names it lacks stay as they are) or a function(file_name) -> parameter name, or nil to
-- drop that array. Two file names mapping to one parameter are an error.
local function map_names(loaded, name_map, path)
  if name_map == nil then return loaded end
  local ty = type(name_map)
  if ty ~= "table" and ty ~= "function" then
    error("name_map must be a table or a function, got " .. ty, 0)
  end
  local out, from = {}, {}
  for k, v in pairs(loaded) do
    local to
    if ty == "table" then to = name_map[k] or k else to = name_map(k) end
    if to ~= nil then
      if type(to) ~= "string" then
        error(string.format("name_map gave %s for '%s' (a name or nil expected)", type(to), k), 0)
      end
      if from[to] then
        error(string.format("name_map maps both '%s' and '%s' of file '%s' to '%s'", from[to], k,
          path, to), 0)
      end
      from[to], out[to] = k, v
    end
  end
  return out
end

function M.load_block(self, path, opts, level)
  opts = check_opts("load_parameters", opts, LOAD_OPTS, level)
  local loaded = read(path, "load_parameters", level)
  local ok, mapped = pcall(map_names, loaded, opts.name_map, path)
  if not ok then error("load_parameters: " .. tostring(mapped), level) end
  loaded = mapped
  load_into(self:collect_params(), loaded, path, opts, "load_parameters", "block", level + 1)
end

---------------------------------------------------------------- ParameterDict
local SAVE = class.signature("ParameterDict.save", { "filename", "strip_prefix" })
local LOAD = class.signature("ParameterDict.load", { "filename", "ctx", "allow_missing",
  "ignore_extra", "restore_prefix", "cast_dtype", "dtype_source" })
M.SAVE_SIG, M.LOAD_SIG = SAVE, LOAD

function M.save_dict(d, level, ...)
  local o = SAVE(level, ...)
  local strip = o.strip_prefix or ""
  local arrays, any = arrays_of(d, "ParameterDict.save", level, false, function(name)
    if name:sub(1, #strip) ~= strip then
      error(string.format("ParameterDict.save: prefix '%s' is to be stripped before saving, "
        .. "but Parameter '%s' does not start with it", strip, name), level + 2)
    end
    return name:sub(#strip + 1)
  end)
  if not any then error("ParameterDict.save: the dict has no parameters", level) end
  nd.save(o.filename, arrays)
end

function M.load_dict(d, level, ...)
  local o = LOAD(level, ...)
  local raw = read(o.filename, "ParameterDict.load", level)
  local prefix = o.restore_prefix or ""
  local loaded = {}
  for k, v in pairs(raw) do
    local name = k:gsub("^arg:", ""):gsub("^aux:", "")
    loaded[prefix .. name] = v
  end
  load_into(d, loaded, o.filename, o, "ParameterDict.load", "dict", level + 1)
end

return M
