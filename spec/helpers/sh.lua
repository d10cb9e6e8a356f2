-- spec/helpers/sh.lua — run a shell command: its exit status and its whole output
-- (stdout and stderr together).
--   local rc, out = require("helpers.sh")("make -C build")
return function(cmd)
  local p = assert(io.popen(cmd .. " 2>&1; echo \"rc=$?\""))
  local out = p:read("*a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return rc, out
end
