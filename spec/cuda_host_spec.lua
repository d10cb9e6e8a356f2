-- spec/cuda_host_spec.lua — the host-side parts of libmx_cuda that can be checked on
-- any machine (no GPU, no nvcc): the broadcast geometry of kernels/cuda/bcast_geom.h,
-- compiled with the host C++ compiler against tools/test_bcast_geom.cpp.
local sh = require("helpers.sh")

describe("libmx_cuda host code", function()
  it("coalesces broadcast geometry exactly like the reference offsets", function()
    local rc = sh("command -v g++")
    if rc ~= 0 then
      pending("no g++ here")
      return
    end
    local exe = os.tmpname()
    local out
    rc, out = sh("g++ -std=c++17 -O1 -Wall -Wextra -Werror -Ikernels/cuda "
      .. "tools/test_bcast_geom.cpp -o " .. exe .. " && " .. exe)
    os.remove(exe)
    assert(rc == 0, out)
    assert.matches("0 failing cases", out)
  end)
end)
