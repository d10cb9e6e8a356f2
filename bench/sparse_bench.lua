-- bench/sparse_bench.lua — dot(csr, dense) and dot(csr^T, dense) (the SpMM of sparse
-- linear models and graph aggregation): a random 20000 x 20000 csr with 200k entries times
-- a (20000, 64) float32 matrix; bench/sparse_bench.py runs the same data (written here to
-- /tmp/luamx_sparse_bench.params, a sparse .params MXNet loads) through MXNet 1.9.1 and
-- scipy.sparse.
--   LUA_PATH="bench/?.lua;lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build/lib/?.so;;" \
--     luajit bench/sparse_bench.lua [--threads=1]
local H = require("harness")
local mx = H.mx_setup(arg)
local nd = mx.nd
H.env_note()

local PATH = "/tmp/luamx_sparse_bench.params"
mx.random.seed(5)
local n, nnz, cols = 20000, 200000, 64
local row = nd.floor(nd.random_uniform { low = 0, high = n, shape = { nnz } }):astype("int64")
local col = nd.floor(nd.random_uniform { low = 0, high = n, shape = { nnz } }):astype("int64")
local val = nd.random_uniform { low = -1, high = 1, shape = { nnz } }
local a = nd.sparse.csr_matrix({ val, { row, col } }, { shape = { n, n } })
local b = nd.random_uniform { low = -1, high = 1, shape = { n, cols } }
nd.save(PATH, { a = a, b = b })
local flops = 2 * a:nnz() * cols

local t = H.time(function(k) for _ = 1, k do nd.dot(a, b):wait_to_read() end end,
  { n = 10, reps = 7 })
H.report("spmm_csr_dense", t.median / 1e6, "ms",
  { note = string.format("%.2f GFLOP/s, nnz %d", flops / t.median, a:nnz()) })
t = H.time(function(k)
  for _ = 1, k do nd.dot(a, b, { transpose_a = true }):wait_to_read() end
end, { n = 10, reps = 7 })
H.report("spmm_csrT_dense", t.median / 1e6, "ms",
  { note = string.format("%.2f GFLOP/s, row_sparse result", flops / t.median) })
