-- spec/architecture_spec.lua — the shape of the C tree, drawn from its own includes and
-- calls (docs/design/architecture.md "The core's structure"): core/ includes nothing from
-- kernels/, the only mutual tie among core's modules is tensor <-> engine (MXNet's own),
-- and a fast kernel never calls a reference kernel.

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local function ls(dir, ext)
  local out = {}
  local p = io.popen("ls " .. dir .. " 2>/dev/null")
  for name in p:lines() do
    if name:sub(-#ext) == ext then out[#out + 1] = dir .. "/" .. name end
  end
  p:close()
  table.sort(out)
  return out
end

local function strip_comments(s)
  s = s:gsub("/%*.-%*/", function(c) return (c:gsub("[^\n]", "")) end)
  return (s:gsub("//[^\n]*", ""))
end

local CORE_DIRS = { "core/src", "core/ops" }
local KERNEL_DIRS = { "kernels/ref", "kernels/cpu", "kernels/dnnl" }

-- A module is a .c file and the header of the same base name beside it.
local function module_of(path) return path:match("([^/]+)%.[ch]$") end

-- name -> defining file, for every non-static mx_ function of the given files
local function definitions(files)
  local def = {}
  for _, f in ipairs(files) do
    local s = "\n" .. strip_comments(read(f))
    for pos, name in s:gmatch("\n[%a_][%w_ %*]-[ %*]()(mx_[%w_]+)%s*%(") do
      local head = s:sub(pos - 40 > 0 and pos - 40 or 1, pos)
      local line = head:match("[^\n]*$") or ""
      if not line:find("static") and not line:find("typedef") then
        local brace, semi = s:find("{", pos, true), s:find(";", pos, true)
        if brace and (not semi or brace < semi) then def[name] = def[name] or f end
      end
    end
  end
  return def
end

describe("C structure", function()
  local core = {}
  for _, d in ipairs(CORE_DIRS) do
    for _, f in ipairs(ls(d, ".c")) do core[#core + 1] = f end
    for _, f in ipairs(ls(d, ".h")) do core[#core + 1] = f end
  end

  it("core/ includes no header of kernels/", function()
    local kheaders = {}
    for _, d in ipairs(KERNEL_DIRS) do
      for _, f in ipairs(ls(d, ".h")) do kheaders[f:match("[^/]+$")] = f end
    end
    local cheaders = {}
    for _, f in ipairs(core) do
      if f:sub(-2) == ".h" then cheaders[f:match("[^/]+$")] = true end
    end
    local bad = {}
    for _, f in ipairs(core) do
      for inc in read(f):gmatch('#include%s+"([^"]+)"') do
        if kheaders[inc] and not cheaders[inc] then bad[#bad + 1] = f .. " includes " .. kheaders[inc] end
      end
    end
    assert.are.same({}, bad)
  end)

  it("core/ calls no function of kernels/", function()
    local kfiles = {}
    for _, d in ipairs(KERNEL_DIRS) do
      for _, f in ipairs(ls(d, ".c")) do kfiles[#kfiles + 1] = f end
    end
    local kdef = definitions(kfiles)
    local bad = {}
    for _, f in ipairs(core) do
      for name in strip_comments(read(f)):gmatch("(mx_[%w_]+)%s*%(") do
        if kdef[name] then bad[#bad + 1] = f .. " calls " .. name .. " (" .. kdef[name] .. ")" end
      end
    end
    assert.are.same({}, bad)
  end)

  it("has no circle among core's modules but tensor <-> engine", function()
    local files = {}
    for _, f in ipairs(core) do if f:sub(-2) == ".c" then files[#files + 1] = f end end
    local def = definitions(files)
    local headers = {}
    for _, f in ipairs(core) do if f:sub(-2) == ".h" then headers[module_of(f)] = true end end
    -- edges: module -> module it calls (a function defined there) or includes (its .h);
    -- internal.h and the generated headers are declarations every module shares
    local edges, mods = {}, {}
    local function edge(a, b)
      if a == b or b == "internal" or b == "mx" then return end
      edges[a] = edges[a] or {}
      edges[a][b] = true
    end
    for _, f in ipairs(core) do
      local m = module_of(f)
      mods[m] = true
      local s = strip_comments(read(f))
      for inc in s:gmatch('#include%s+"([^"]+)%.h"') do
        if headers[inc] then edge(m, inc) end
      end
      if f:sub(-2) == ".c" then -- a header's prototypes are declarations, not calls
        for name in s:gmatch("(mx_[%w_]+)%s*%(") do
          local d = def[name]
          if d then edge(m, module_of(d)) end
        end
      end
    end
    -- Tarjan's strongly connected components
    local index, low, onstack, stack, n, comps = {}, {}, {}, {}, 0, {}
    local function visit(v)
      n = n + 1
      index[v], low[v] = n, n
      stack[#stack + 1] = v
      onstack[v] = true
      for w in pairs(edges[v] or {}) do
        if not index[w] then
          visit(w)
          low[v] = math.min(low[v], low[w])
        elseif onstack[w] then
          low[v] = math.min(low[v], index[w])
        end
      end
      if low[v] == index[v] then
        local comp = {}
        repeat
          local w = table.remove(stack)
          onstack[w] = nil
          comp[#comp + 1] = w
        until w == v
        if #comp > 1 then
          table.sort(comp)
          comps[#comps + 1] = table.concat(comp, " <-> ")
        end
      end
    end
    local names = {}
    for m in pairs(mods) do names[#names + 1] = m end
    table.sort(names)
    for _, m in ipairs(names) do if not index[m] then visit(m) end end
    table.sort(comps)
    assert.are.same({ "engine <-> tensor" }, comps)
  end)

  it("gives no fast kernel a call to a reference kernel (the oracle stays independent)", function()
    local bad = {}
    for _, d in ipairs({ "kernels/cpu", "kernels/dnnl", "kernels/cuda" }) do
      for _, ext in ipairs({ ".c", ".h", ".cu", ".cuh" }) do
        for _, f in ipairs(ls(d, ext)) do
          local s = strip_comments(read(f))
          for name in s:gmatch("(mx_ref_[%w_]+)") do bad[#bad + 1] = f .. ": " .. name end
          for inc in s:gmatch('#include%s+"([^"]+)"') do
            if inc == "ref.h" then bad[#bad + 1] = f .. " includes ref.h" end
          end
        end
      end
    end
    assert.are.same({}, bad)
  end)
end)
