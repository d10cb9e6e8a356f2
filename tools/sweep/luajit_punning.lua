-- tools/sweep/luajit_punning.lua — why the sweep decodes bfloat16 arithmetically: LuaJIT's JIT
-- does not see a store through uint32_t* and a load through float* of the same cell as
-- aliasing, so once the loop is compiled the load returns a stale value (no error).
-- luajit tools/sweep/luajit_punning.lua: thousands of wrong reads; with -joff: 0.
local ffi = require("ffi")
local src = ffi.new("uint16_t[24]")
for i = 0, 23 do src[i] = 0x3f80 + i end -- bf16 1.0, 1.0078125, ...
local bad = 0
for _ = 1, 200 do
  local u = ffi.new("uint32_t[1]")
  local f = ffi.cast("float*", u)
  for i = 0, 23 do
    u[0] = bit.lshift(src[i], 16)
    local v = f[0]
    if v ~= 1 + i / 128 then bad = bad + 1 end
  end
end
print("wrong reads", bad)
