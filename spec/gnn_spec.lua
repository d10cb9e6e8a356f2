-- the gnn op family (gspmm, gsddmm, edge_softmax and their gradients) through mx.dgl.ops:
-- every binary op x reducer x target against an oracle built from dense ops and Lua loops
-- over the edge list, the cpu kernels against the reference ones (forward and backward),
-- float64 finite-difference gradients of DGL's named forms, segment ops, update_all and
-- apply_edges, and the errors
local mx = require("mx")
local nd = mx.nd
local dgl = mx.dgl
local gradcheck = require("helpers.gradcheck")
local close = require("helpers.close").within(1e-9)

-- a graph with a self loop, a repeated edge and a node (5) without in-edges
local SRC = { 0, 0, 1, 3, 3, 2, 4, 4, 1, 0, 2 }
local DST = { 1, 2, 2, 0, 2, 3, 4, 0, 3, 1, 0 }
local N, E = 6, #SRC
local g = dgl.graph({ SRC, DST }, { num_nodes = N })

local function rand(shape, lo, hi, dtype)
  return nd.random.uniform(lo or -1, hi or 1, shape, { dtype = dtype or "float64" })
end

-- operand rows for each edge (target u, v or e), with DGL's padding of feature dims
local function rows(x, t, nd_to)
  local idx = {}
  for i = 1, E do idx[i] = (t == "u" and SRC[i] or t == "v" and DST[i] or i - 1) + 1 end
  local r = nd.take(x, nd.array(idx, { dtype = "int64" }))
  local s = r:shape()
  local pad = { s[1] }
  for _ = 1, nd_to - #s do pad[#pad + 1] = 1 end
  for d = 2, #s do pad[#pad + 1] = s[d] end
  return r:reshape(pad)
end

-- (E, features...) messages from dense ops
local function messages(op, x, y, lt, rt)
  if op == "copy_lhs" then return rows(x, lt, x:ndim()) end
  if op == "copy_rhs" then return rows(y, rt, y:ndim()) end
  local n = math.max(x:ndim(), y:ndim())
  local a, b = rows(x, lt, n), rows(y, rt, n)
  if op == "dot" then return nd.sum(nd.mul(a, b), { axis = n, keepdims = true }) end
  return nd[op](a, b)
end

-- reduce (E, P) messages per destination in Lua: out (N, P)
local function reduce(m, how)
  local s = m:shape()
  local v = m:tolist()
  local P = #v / E
  local out = {}
  for node = 0, N - 1 do
    local cnt = 0
    for f = 1, P do out[node * P + f] = 0 end
    for i = 1, E do
      if DST[i] == node then
        cnt = cnt + 1
        for f = 1, P do
          local x, o = v[(i - 1) * P + f], node * P + f
          if how == "sum" or how == "mean" then out[o] = out[o] + x
          elseif cnt == 1 then out[o] = x
          elseif how == "max" then out[o] = math.max(out[o], x)
          else out[o] = math.min(out[o], x) end
        end
      end
    end
    if how == "mean" and cnt > 0 then
      for f = 1, P do out[node * P + f] = out[node * P + f] / cnt end
    end
  end
  s[1] = N
  return out, s
end

local function red1(m, how) return (reduce(m, how)) end

local BIN = { "add", "sub", "mul", "div", "dot", "copy_lhs", "copy_rhs" }
local RED = { "sum", "mean", "max", "min" }
-- operand shapes (rows added by target): same, broadcast, different ranks
-- (and one operand's elements repeated in blocks over the other's: the cpu kernels' fast
-- path, both ways)
local SHAPES = { { { 3 }, { 3 } }, { { 2, 1 }, { 1, 3 } }, { { 4 }, { 2, 4 } },
  { { 2, 3 }, { 2, 1 } }, { { 2, 1 }, { 2, 3 } } }

-- dot needs the last dims to agree
local function dot_ok(sh) return sh[1][#sh[1]] == sh[2][#sh[2]] end

local function nrows(t) return t == "e" and E or N end
local function operands(lt, rt, sh, dtype)
  local ls, rs = { nrows(lt) }, { nrows(rt) }
  for _, d in ipairs(sh[1]) do ls[#ls + 1] = d end
  for _, d in ipairs(sh[2]) do rs[#rs + 1] = d end
  return rand(ls, -1, 1, dtype), rand(rs, 0.5, 1.5, dtype) -- rhs away from 0 (div)
end

describe("gnn ops: gspmm", function()
  it("matches the edge-list oracle for every binary op and reducer", function()
    mx.random.seed(3)
    for _, op in ipairs(BIN) do
      for _, red in ipairs(RED) do
        for k, sh in ipairs(SHAPES) do
          local copy = op:sub(1, 4) == "copy"
          if not (copy and k > 1) and not (op == "dot" and not dot_ok(sh)) then
            local x, y = operands("u", "e", sh)
            local want, shape = reduce(messages(op, x, y, "u", "e"), red)
            local got = dgl.ops.gspmm(g, op, red, x, y)
            assert.are.same(shape, got:shape(), op .. " " .. red)
            close(got, want)
            local c = g:_csr()
            local o = { binary_op = op, reduce_op = red }
            local ref
            if op == "copy_lhs" then
              o.binary_op = "copy"
              ref = nd._ref.gspmm(c[1], c[2], c[3], x, o)
            elseif op == "copy_rhs" then
              o.binary_op, o.lhs_target = "copy", "e"
              ref = nd._ref.gspmm(c[1], c[2], c[3], y, o)
            else
              ref = nd._ref.gspmm(c[1], c[2], c[3], x, y, o)
            end
            close(ref, want)
          end
        end
      end
    end
  end)

  it("names every spmm form as DGL does", function()
    mx.random.seed(4)
    local x, w = rand({ N, 3 }), rand({ E, 3 }, 0.5, 1.5)
    for _, b in ipairs({ "add", "sub", "mul", "div", "dot" }) do
      for _, r in ipairs(RED) do
        close(dgl.ops["u_" .. b .. "_e_" .. r](g, x, w), dgl.ops.gspmm(g, b, r, x, w))
      end
    end
    for _, r in ipairs(RED) do
      close(dgl.ops["copy_u_" .. r](g, x), red1(messages("copy_lhs", x, nil, "u"), r))
      close(dgl.ops["copy_e_" .. r](g, w), red1(messages("copy_rhs", nil, w, nil, "e"), r))
    end
    -- edge weights (E) broadcast over the features, as DGL's u_mul_e_sum with (E, 1)
    local ew = rand({ E, 1 })
    close(dgl.ops.u_mul_e_sum(g, x, ew), red1(messages("mul", x, ew, "u", "e"), "sum"))
  end)
end)

describe("gnn ops: gsddmm", function()
  it("matches the edge-list oracle for every target pair and binary op", function()
    mx.random.seed(5)
    for _, lt in ipairs({ "u", "v", "e" }) do
      for _, rt in ipairs({ "u", "v", "e" }) do
        if lt ~= rt then
          for _, b in ipairs({ "add", "sub", "mul", "div", "dot" }) do
            for _, sh in ipairs(SHAPES) do
              if b == "dot" and not dot_ok(sh) then goto next end
              local x, y = operands(lt, rt, sh)
              local want = messages(b, x, y, lt, rt)
              local got = dgl.ops[lt .. "_" .. b .. "_" .. rt](g, x, y)
              assert.are.same(want:shape(), got:shape())
              close(got, want)
              close(dgl.ops.gsddmm(g, b, x, y, lt, rt), want)
              ::next::
            end
          end
        end
      end
    end
    local x = rand({ N, 2 })
    close(dgl.ops.copy_u(g, x), rows(x, "u", 2))
    close(dgl.ops.copy_v(g, x), rows(x, "v", 2))
  end)
end)

-- every combination's cpu kernel against the reference, both operands' gradients
describe("gnn ops: cpu kernels against the reference", function()
  local ip, ix, ei = unpack(g:_csr())
  local function both(fname, ...)
    local a, b = nd[fname](...), nd._ref[fname](...)
    return a, b
  end
  for _, dtype in ipairs({ "float64", "float32" }) do
    it("forward and backward agree (" .. dtype .. ")", function()
      mx.random.seed(6)
      local tol = dtype == "float64" and 1e-12 or 1e-5
      for _, b in ipairs({ "add", "sub", "mul", "div", "dot", "copy" }) do
        for _, lt in ipairs({ "u", "v", "e" }) do
          for _, rt in ipairs({ "u", "v", "e" }) do
            for k, sh in ipairs(SHAPES) do
              if not (b == "copy" and (rt ~= "e" or k > 1)) and not (b == "dot" and not dot_ok(sh)) then
                local x, y = operands(lt, rt, sh, dtype)
                if b == "copy" then y = nil end
                for _, red in ipairs(RED) do
                  local o = { binary_op = b, reduce_op = red, lhs_target = lt, rhs_target = rt }
                  local args = y and { ip, ix, ei, x, y } or { ip, ix, ei, x }
                  args[#args + 1] = o
                  local f1, f2 = both("gspmm", unpack(args))
                  close(f1, f2, tol)
                  local og = rand(f1:shape(), -1, 1, dtype)
                  for _, wrt in ipairs(y and { "lhs", "rhs" } or { "lhs" }) do
                    local bo = { binary_op = b, reduce_op = red, lhs_target = lt, rhs_target = rt,
                      wrt = wrt }
                    local a1 = y and { og, ip, ix, ei, x, y, bo } or { og, ip, ix, ei, x, bo }
                    local g1, g2 = both("gspmm_backward", unpack(a1))
                    close(g1, g2, tol)
                  end
                end
                local so = { binary_op = b, lhs_target = lt, rhs_target = rt }
                local s1, s2 = both("gsddmm", ip, ix, ei, x, y or so, y and so or nil)
                close(s1, s2, tol)
                local og = rand(s1:shape(), -1, 1, dtype)
                for _, wrt in ipairs(y and { "lhs", "rhs" } or { "lhs" }) do
                  local bo = { binary_op = b, lhs_target = lt, rhs_target = rt, wrt = wrt }
                  local a1 = y and { og, ip, ix, ei, x, y, bo } or { og, ip, ix, ei, x, bo }
                  local g1, g2 = both("gsddmm_backward", unpack(a1))
                  close(g1, g2, tol)
                end
              end
            end
          end
        end
      end
      local lg = rand({ E, 2, 3 }, -3, 3, dtype)
      local y1, y2 = both("edge_softmax", ip, ei, lg)
      close(y1, y2, tol)
      local og = rand({ E, 2, 3 }, -1, 1, dtype)
      local b1, b2 = both("edge_softmax_backward", og, ip, ei, y1)
      close(b1, b2, tol)
    end)
  end
end)

-- the cpu kernels' fast paths (sum / mean, in-place and per-block messages, the source-row
-- gradients, the part buffers of a large scatter) need wider rows and more edges than the
-- small graph gives: a random graph of 300 nodes and about 4000 edges against the reference
describe("gnn ops: cpu fast paths against the reference (a larger graph)", function()
  local n, src, dst, s = 300, {}, {}, 7
  local function nxt(k)
    s = s * 48271 % 2147483647
    return s % k
  end
  for _ = 1, 3700 do src[#src + 1], dst[#dst + 1] = nxt(n), nxt(n) end
  for v = 0, n - 1, 2 do src[#src + 1], dst[#dst + 1] = v, v end -- odd nodes may have none
  local G = dgl.graph({ src, dst }, { num_nodes = n })
  local M = #src
  local ip, ix, ei = unpack(G:_csr())
  local function count(t) return t == "e" and M or n end
  -- close() without a message per element (rows of 75 x 4000 edges); close() says where
  local function near(got, want, tol)
    local x, y = got:tolist(), want:tolist()
    local ok = #x == #y
    for i = 1, ok and #y or 0 do
      local d = math.abs(x[i] - y[i])
      if d ~= d or d > tol * math.max(1, math.abs(y[i])) then ok = false break end
    end
    if not ok then close(got, want, tol) end
  end
  -- {binary, lhs target, lhs feature shape, rhs target, rhs feature shape}
  local CASES = {
    { "copy", "u", { 75 } }, { "copy", "e", { 40 } }, { "copy", "u", { 5 } },
    { "mul", "u", { 75 }, "e", { 1 } }, { "mul", "u", { 24 }, "e", { 24 } },
    { "mul", "u", { 4, 16 }, "e", { 4, 1 } }, { "mul", "u", { 3, 3 }, "e", { 3, 1 } },
    { "mul", "u", { 1 }, "e", { 24 } }, { "mul", "v", { 8, 8 }, "u", { 8, 1 } },
    { "mul", "u", { 8, 8 }, "e", { 8, 1 } }, { "mul", "u", { 4, 4 }, "e", { 4, 1 } },
    { "add", "u", { 8, 1 }, "v", { 8, 1 } }, { "sub", "u", { 16 }, "e", { 16 } },
    { "mul", "u", { 4, 1 }, "v", { 4, 16 } }, { "add", "e", { 4, 16 }, "u", { 4, 1 } },
  }
  for _, dtype in ipairs({ "float32", "float64" }) do
    it("gspmm, gsddmm and their gradients (" .. dtype .. ")", function()
      mx.random.seed(11)
      local tol = dtype == "float64" and 1e-12 or 1e-5
      for _, c in ipairs(CASES) do
        local b, lt, rt = c[1], c[2], c[4] or "e"
        local ls, rs = { count(lt) }, { count(rt) }
        for _, d in ipairs(c[3]) do ls[#ls + 1] = d end
        for _, d in ipairs(c[5] or {}) do rs[#rs + 1] = d end
        local x, y = rand(ls, -1, 1, dtype), c[5] and rand(rs, -1, 1, dtype) or nil
        local function args(first, opts)
          local a = { ip, ix, ei, x }
          if first then table.insert(a, 1, first) end
          if y then a[#a + 1] = y end
          a[#a + 1] = opts
          return unpack(a)
        end
        for _, red in ipairs({ "sum", "mean" }) do
          local o = { binary_op = b, reduce_op = red, lhs_target = lt, rhs_target = rt }
          local f1 = nd.gspmm(args(nil, o))
          near(f1, nd._ref.gspmm(args(nil, o)), tol)
          local og = rand(f1:shape(), -1, 1, dtype)
          for _, wrt in ipairs(y and { "lhs", "rhs" } or { "lhs" }) do
            local bo = { binary_op = b, reduce_op = red, lhs_target = lt, rhs_target = rt, wrt = wrt }
            near(nd.gspmm_backward(args(og, bo)), nd._ref.gspmm_backward(args(og, bo)), tol)
          end
        end
        local so = { binary_op = b, lhs_target = lt, rhs_target = rt }
        local s1 = nd.gsddmm(args(nil, so))
        near(s1, nd._ref.gsddmm(args(nil, so)), tol)
        local og = rand(s1:shape(), -1, 1, dtype)
        for _, wrt in ipairs(y and { "lhs", "rhs" } or { "lhs" }) do
          local bo = { binary_op = b, lhs_target = lt, rhs_target = rt, wrt = wrt }
          near(nd.gsddmm_backward(args(og, bo)), nd._ref.gsddmm_backward(args(og, bo)), tol)
        end
      end
      for _, sh in ipairs({ { M, 8, 1 }, { M, 1 } }) do
        local lg = rand(sh, -3, 3, dtype)
        local y1 = nd.edge_softmax(ip, ei, lg)
        near(y1, nd._ref.edge_softmax(ip, ei, lg), tol)
        local og = rand(sh, -1, 1, dtype)
        near(nd.edge_softmax_backward(og, ip, ei, y1), nd._ref.edge_softmax_backward(og, ip, ei, y1),
          tol)
      end
    end)
  end
  it("a graph whose indices change between calls is checked again", function()
    local ip2, ix2, ei2 = ip:copy(), ix:copy(), ei:copy()
    local x = rand({ n, 8 })
    close(nd.gspmm(ip2, ix2, ei2, x, { binary_op = "copy" }), nd._ref.gspmm(ip, ix, ei, x,
      { binary_op = "copy" }))
    ix2[{ 1 }] = n + 5
    local ok, e = pcall(nd.gspmm, ip2, ix2, ei2, x, { binary_op = "copy" })
    assert.is_false(ok)
    assert.matches("indices%[1%] = " .. (n + 5) .. " names no row", tostring(e))
  end)
end)

describe("gnn ops: gradients (float64 finite differences)", function()
  local function check(f, inputs)
    local ok, msg = gradcheck.check(f, inputs)
    assert(ok, msg)
  end
  it("spmm forms: u_mul_e_sum, u_add_e_mean, u_div_e_sum, u_dot_e_sum, copy_e_sum", function()
    mx.random.seed(7)
    check(function(x, w) return dgl.ops.u_mul_e_sum(g, x, w) end, { rand({ N, 3 }), rand({ E, 1 }) })
    check(function(x, w) return dgl.ops.u_add_e_mean(g, x, w) end, { rand({ N, 2, 1 }), rand({ E, 3 }) })
    check(function(x, w) return dgl.ops.u_div_e_sum(g, x, w) end,
      { rand({ N, 2 }), rand({ E, 2 }, 0.5, 1.5) })
    check(function(x, w) return dgl.ops.u_dot_e_sum(g, x, w) end, { rand({ N, 2, 3 }), rand({ E, 1, 3 }) })
    check(function(w) return dgl.ops.copy_e_sum(g, w) end, { rand({ E, 2 }) })
  end)
  it("max and min pass the gradient to the winning edge only", function()
    -- distinct values: no ties within 0.05, so the winners do not move under eps
    local xs = {}
    for i = 1, N * 2 do xs[i] = i * 0.37 % 2.1 - 1 + i * 1e-3 end
    local x = nd.array(xs, { dtype = "float64" }):reshape { N, 2 }
    check(function(a) return dgl.ops.copy_u_max(g, a) end, { x })
    check(function(a) return dgl.ops.copy_u_min(g, a) end, { x:copy() })
    local ws = {}
    for i = 1, E do ws[i] = 0.11 * i end
    check(function(a) return dgl.ops.copy_e_max(g, a) end,
      { nd.array(ws, { dtype = "float64" }):reshape { E, 1 } })
  end)
  it("sddmm forms and edge_softmax", function()
    mx.random.seed(8)
    check(function(a, b) return dgl.ops.u_dot_v(g, a, b) end, { rand({ N, 4 }), rand({ N, 4 }) })
    check(function(a, b) return dgl.ops.u_add_v(g, a, b) end, { rand({ N, 2, 1 }), rand({ N, 3 }) })
    check(function(a, b) return dgl.ops.e_div_v(g, a, b) end, { rand({ E, 2 }), rand({ N, 2 }, 0.5, 1.5) })
    check(function(a, b) return dgl.ops.v_sub_e(g, a, b) end, { rand({ N, 2 }), rand({ E, 1 }) })
    check(function(a) return dgl.ops.edge_softmax(g, a) end, { rand({ E, 3 }) })
    check(function(a) return dgl.ops.edge_softmax(g, a, { norm_by = "src" }) end, { rand({ E, 2 }) })
  end)
end)

describe("gnn ops: edge_softmax and segments", function()
  it("edge_softmax normalises over each node's in-edges (or out-edges)", function()
    mx.random.seed(9)
    local a = rand({ E, 2 }, -2, 2)
    local y = dgl.edge_softmax(g, a):tolist()
    local v = a:tolist()
    for _, by in ipairs({ "dst", "src" }) do
      if by == "src" then y = dgl.edge_softmax(g, a, { norm_by = "src" }):tolist() end
      local ends = by == "dst" and DST or SRC
      for node = 0, N - 1 do
        for f = 1, 2 do
          local s = 0
          for i = 1, E do if ends[i] == node then s = s + math.exp(v[(i - 1) * 2 + f]) end end
          for i = 1, E do
            if ends[i] == node then
              close({ y[(i - 1) * 2 + f] }, { math.exp(v[(i - 1) * 2 + f]) / s })
            end
          end
        end
      end
    end
  end)

  it("segment_reduce, segment_sum/mean/max/min and segment_softmax over consecutive rows", function()
    local x = nd.array({ 1, 5, 2, 4, 3, 3, 9, 0, 7, 1 }, { dtype = "float64" }):reshape { 5, 2 }
    local seg = { 2, 0, 3 }
    assert.are.same({ 3, 9, 0, 0, 19, 4 }, dgl.ops.segment_sum(seg, x):tolist())
    assert.are.same({ 3, 9, 0, 0, 19, 4 }, dgl.ops.segment_reduce(seg, x):tolist())
    close(dgl.ops.segment_mean(seg, x), { 1.5, 4.5, 0, 0, 19 / 3, 4 / 3 })
    assert.are.same({ 2, 5, 0, 0, 9, 3 }, dgl.ops.segment_max(seg, x):tolist())
    assert.are.same({ 1, 4, 0, 0, 3, 0 }, dgl.ops.segment_reduce(nd.array(seg, { dtype = "int64" }),
      x, "min"):tolist())
    local s = dgl.ops.segment_softmax(seg, x):tolist()
    local e1, e2 = math.exp(1), math.exp(2)
    close({ s[1], s[3] }, { e1 / (e1 + e2), e2 / (e1 + e2) })
    close({ s[6], s[8], s[10] }, { 3 / 3 * math.exp(3) / (math.exp(3) + math.exp(0) + math.exp(1)),
      1 / (math.exp(3) + 1 + math.exp(1)), math.exp(1) / (math.exp(3) + 1 + math.exp(1)) })
    local ok, e = pcall(function() local r = dgl.ops.segment_sum({ 2, 2 }, x) return r end)
    assert.is_false(ok)
    assert.matches("the lengths sum to 4, value has 5 rows", tostring(e), 1, true)
    assert.matches("gnn_spec.lua", tostring(e), 1, true)
  end)
end)

describe("gnn ops: update_all and apply_edges with edge features", function()
  it("runs DGL's built-in message and reduce functions as one kernel call", function()
    mx.random.seed(10)
    local h, w = rand({ N, 3 }), rand({ E, 1 })
    local gr = dgl.graph({ SRC, DST }, { num_nodes = N })
    gr.ndata.h, gr.edata.w = h, w
    gr:update_all(dgl.fn.u_mul_e("h", "w", "m"), dgl.fn.sum("m", "h2"))
    close(gr.ndata.h2, red1(messages("mul", h, w, "u", "e"), "sum"))
    gr:update_all(dgl.fn.copy_u("h", "m"), dgl.fn.max("m", "hmax"))
    close(gr.ndata.hmax, red1(messages("copy_lhs", h, nil, "u"), "max"))
    gr:update_all(dgl.fn.copy_e("w", "m"), dgl.fn.mean("m", "wm"))
    close(gr.ndata.wm, red1(messages("copy_rhs", nil, w, nil, "e"), "mean"))
    gr:apply_edges(dgl.fn.u_dot_v("h", "h", "s"))
    close(gr.edata.s, messages("dot", h, h, "u", "v"))
    local ok, e = pcall(function() gr:update_all(dgl.fn.copy_u("h", "m"), dgl.fn.sum("x", "y")) end)
    assert.is_false(ok)
    assert.matches("sum reads message 'x', copy_u writes 'm'", tostring(e), 1, true)
    ok, e = pcall(function() gr:apply_edges(dgl.fn.u_add_e("h", "nope", "s")) end)
    assert.is_false(ok)
    assert.matches('g.edata["nope"] is not set', tostring(e), 1, true)
  end)
end)

describe("gnn ops: errors", function()
  local function err(f, want)
    local ok, e = pcall(f)
    assert.is_false(ok)
    assert.matches(want, tostring(e), 1, true)
    assert.matches("gnn_spec.lua", tostring(e), 1, true)
  end
  it("names the op, the operand and the shapes", function()
    local x = nd.ones({ N, 2 })
    err(function() dgl.ops.u_mul_e_sum(g, x, nd.ones({ 5, 2 })) end,
      "rhs at target e must have 11 rows (the edges), got shape (5, 2)")
    err(function() dgl.ops.u_dot_v(g, x, nd.ones({ N, 3 })) end, "dot needs operands whose last dims agree")
    err(function() dgl.ops.u_add_v(g, x, nd.ones({ N, 3 })) end, "do not broadcast")
    err(function() dgl.ops.gspmm(g, "pow", "sum", x, x) end, "op must be add, sub, mul, div")
    err(function() dgl.ops.gspmm(g, "mul", "prod", x, x) end, "reduce_op must be sum, mean, max or min")
    err(function() dgl.ops.copy_u_sum(g, nd.ones({ N, 2 }, { dtype = "int32" })) end,
      "lhs must be a float tensor")
    err(function() dgl.ops.u_mul_v(g, x, nd.ones({ N, 2 }, { dtype = "float64" })) end,
      "rhs is float64, the other operand float32")
    err(function() dgl.ops.copy_u_sum({}, x) end, "expected a graph")
    local ip, ix, ei = unpack(g:_csr())
    err(function() nd.gspmm(ip, ix, ei, nd.ones({ 3, 2 }), { binary_op = "copy" }) end,
      "names no row of the source-node operand (3 rows)")
  end)
end)
