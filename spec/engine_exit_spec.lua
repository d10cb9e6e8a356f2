-- The exit crash: a script that ends with oneDNN GEMMs still queued on two engine
-- workers. The engine's exit drain must run before oneDNN's static destructors free
-- the JIT code a worker is executing (kernels/dnnl/dnnl.c, mx_dnnl_note_use), so the
-- child exits 0, every time.
describe("engine exit with oneDNN GEMMs queued", function()
  it("exits 0 in 20 of 20 child processes (the old core crashed in about 1 of 10)", function()
    local code = 'local mx = require("mx") mx.engine.set_num_workers(2) ' ..
      'local a = mx.nd.random.uniform(0, 1, {1024, 1024}) local r = {} ' ..
      'for i = 1, 6 do r[i] = mx.nd.dot(a, a) end'
    for run = 1, 20 do
      local cmd = string.format("LUA_PATH=%q LUA_CPATH=%q timeout 120 luajit -e %q 2>&1; echo rc=$?",
        package.path, package.cpath, code)
      local p = assert(io.popen(cmd))
      local out = p:read("*a")
      p:close()
      assert(out:find("rc=0\n", 1, true), ("run %d: %s"):format(run, out))
    end
  end)
end)
