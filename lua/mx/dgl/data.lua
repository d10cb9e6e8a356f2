-- mx.dgl.data — real graphs from Debian's python3-networkx, read from its files (no network,
-- no Python): each returns nil and why when the file is missing.
--   les_miserables(): Knuth's co-appearance network of the novel's 77 characters (254
--     weighted edges, both directions in the graph; g.edata.weight; the names in node order,
--     the order networkx adds them)
--   wormnet(): WormNet v3's gold-standard benchmark of C. elegans gene links (2445 genes,
--     78736 links, both directions; the gene names in node order, as networkx's
--     read_edgelist of the file in python3-networkx's examples)
--   graph_atlas(): the 1253 graphs of "An Atlas of Graphs" (Read & Wilson: every graph of
--     0..7 nodes, networkx's atlas.dat.gz, read through zlib), undirected (both directions)
local ffi = require("ffi")
local nd = require("mx.nd")

local ipairs = ipairs

local M = {}

M.NETWORKX = "/usr/lib/python3/dist-packages/networkx/generators/"

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

function M.les_miserables()
  local dgl = require("mx.dgl")
  local src = read(M.NETWORKX .. "social.py")
  if not src then return nil, "networkx's social.py not found (Debian package python3-networkx)" end
  local body = src:match("def les_miserables_graph%(%).-\n(.-)\n    return G")
  if not body then return nil, "social.py: les_miserables_graph was not found" end
  local id, names, s, d, w = {}, {}, {}, {}, {}
  local function node(name)
    if not id[name] then
      names[#names + 1] = name
      id[name] = #names - 1
    end
    return id[name]
  end
  for a, b, wt in body:gmatch('G%.add_edge%("([^"]+)", "([^"]+)", weight=(%d+)%)') do
    local u, v = node(a), node(b)
    s[#s + 1], d[#d + 1], w[#w + 1] = u, v, tonumber(wt)
    s[#s + 1], d[#d + 1], w[#w + 1] = v, u, tonumber(wt)
  end
  if #s == 0 then return nil, "social.py: no Les Miserables edges found" end
  local g = dgl.graph({ s, d }, { num_nodes = #names })
  g.edata.weight = nd.array(w)
  return g, names
end

M.WORMNET = { "/usr/share/doc/python3-networkx/examples/algorithms/WormNet.v3.benchmark.txt",
  "/usr/share/doc/networkx-2.8.8/examples/algorithms/WormNet.v3.benchmark.txt" }

function M.wormnet()
  local dgl = require("mx.dgl")
  local text
  for _, p in ipairs(M.WORMNET) do
    text = read(p)
    if text then break end
  end
  if not text then return nil, "WormNet.v3.benchmark.txt not found (Debian package python3-networkx)" end
  local id, names, s, d, seen = {}, {}, {}, {}, {}
  local function node(name)
    if not id[name] then
      names[#names + 1] = name
      id[name] = #names - 1
    end
    return id[name]
  end
  for a, b in (text .. "\n"):gmatch("([^%s]+)%s+([^%s]+)[^\n]*\n") do
    local u, v = node(a), node(b)
    local k = u < v and u * 1e6 + v or v * 1e6 + u
    if u ~= v and not seen[k] then -- an undirected graph: one edge per pair
      seen[k] = true
      s[#s + 1], d[#d + 1] = u, v
      s[#s + 1], d[#d + 1] = v, u
    end
  end
  return dgl.graph({ s, d }, { num_nodes = #names }), names
end

-- pcall: another module may have declared zlib's functions already
pcall(ffi.cdef, [[
  void *gzopen(const char *path, const char *mode);
  int gzread(void *file, void *buf, unsigned int len);
  int gzclose(void *file);
]])
local zlib
local function gunzip(path)
  if not zlib then
    local ok, lib = pcall(ffi.load, "z")
    if not ok then ok, lib = pcall(ffi.load, "libz.so.1") end
    if not ok then return nil, "zlib not found" end
    zlib = lib
  end
  local f = zlib.gzopen(path, "rb")
  if f == nil then return nil, path .. " not found (Debian package python3-networkx)" end
  local parts, buf = {}, ffi.new("char[65536]")
  while true do
    local n = zlib.gzread(f, buf, 65536)
    if n < 0 then
      zlib.gzclose(f)
      return nil, path .. ": not a valid gzip file"
    end
    if n == 0 then break end
    parts[#parts + 1] = ffi.string(buf, n)
  end
  zlib.gzclose(f)
  return table.concat(parts)
end

function M.graph_atlas()
  local dgl = require("mx.dgl")
  local text, why = gunzip(M.NETWORKX .. "atlas.dat.gz")
  if not text then return nil, why end
  local graphs, cur = {}, nil
  local function close()
    if cur then graphs[#graphs + 1] = dgl.graph({ cur.s, cur.d }, { num_nodes = cur.n }) end
  end
  for line in text:gmatch("[^\n]+") do
    local gi = line:match("^GRAPH (%d+)")
    if gi then
      close()
      cur = { s = {}, d = {}, n = 0 }
    elseif line:match("^NODES") then
      cur.n = tonumber(line:match("%d+"))
    else
      local a, b = line:match("^(%d+) (%d+)")
      if a then
        a, b = tonumber(a), tonumber(b)
        cur.s[#cur.s + 1], cur.d[#cur.d + 1] = a, b
        cur.s[#cur.s + 1], cur.d[#cur.d + 1] = b, a
      end
    end
  end
  close()
  return graphs
end

return M
