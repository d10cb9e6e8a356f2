-- bench/dispatch_ic.lua CASE N — N calls of one small op, for instruction counts of the
-- dispatch path under callgrind (repeatable whatever else the machine does):
--   valgrind --tool=callgrind --callgrind-out-file=cg.out luajit bench/dispatch_ic.lua add 20000
--   callgrind_annotate --inclusive=yes cg.out | grep ' mx_op_invoke '   # / N: per call
-- CASE: add (1-element add into out=), add_new (new result), fc (4x16 -> 8), dot (8x8 .
-- 8x8 into out=), relu (1 element, new result), ln (layer_norm (4, 16)).
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local mx = require("mx")
local nd = mx.nd
mx.engine.set_num_threads(1)
local case, n = arg[1], tonumber(arg[2])
local a, b, c = nd.ones{1}, nd.ones{1}, nd.zeros{1}
local x, w, bias, y = nd.ones{4, 16}, nd.ones{8, 16}, nd.ones{8}, nd.zeros{4, 8}
local m1, m2, m3 = nd.ones{8, 8}, nd.ones{8, 8}, nd.zeros{8, 8}
local ln_x, g, be = nd.ones{4, 16}, nd.ones{16}, nd.zeros{16}
local opt = { out = c }
local fopt = { num_hidden = 8, out = y }
local dopt = { out = m3 }
local f
if case == "add" then f = function() nd.add(a, b, opt) end
elseif case == "add_new" then f = function() return nd.add(a, b) end
elseif case == "fc" then f = function() nd.fully_connected(x, w, bias, fopt) end
elseif case == "dot" then f = function() nd.dot(m1, m2, dopt) end
elseif case == "relu" then f = function() return nd.relu(a) end
elseif case == "ln" then f = function() return nd.layer_norm(ln_x, g, be) end
else error("unknown case " .. tostring(case)) end
for _ = 1, n do f() end
nd.waitall()
