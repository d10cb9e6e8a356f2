-- tools/launch.lua: argument parsing, the generated local/ssh/mpi command lines, and the
-- local launcher's process handling (output prefixes, first failing exit code, Ctrl-C).
local J = require("mx.kvstore.ps_job")
local L = loadfile(J.root .. "/tools/launch.lua")("as-module")

local function env_of(p) return p.env end

describe("tools/launch.lua", function()
  it("parses options and rejects bad ones with a message", function()
    local o = L.parse { "-n", "3", "-s", "2", "--launcher", "mpi", "luajit", "train.lua", "-n", "9" }
    assert.are.equal(3, o.workers)
    assert.are.equal(2, o.servers)
    assert.are.equal("mpi", o.launcher)
    assert.are.same({ "luajit", "train.lua", "-n", "9" }, o.command) -- COMMAND's own flags kept
    local function msg(argv)
      local ok, e = pcall(L.parse, argv)
      assert.is_false(ok)
      return e.msg
    end
    assert.are.equal("-n WORKERS: a positive integer", msg { "-s", "1", "x" })
    assert.are.equal("no COMMAND to run", msg { "-n", "1" })
    assert.are.equal("--launcher must be local, ssh or mpi, not yarn",
      msg { "-n", "1", "--launcher", "yarn", "x" })
    assert.are.equal("--launcher ssh needs -H hostfile", msg { "-n", "1", "--launcher", "ssh", "x" })
    assert.are.equal("unknown option --bogus", msg { "-n", "1", "--bogus", "x" })
  end)

  it("plans local processes with MXNet's DMLC_* variables", function()
    local o = L.parse { "-n", "2", "-s", "2", "--port", "9999", "luajit", "t.lua" }
    local procs = L.plan(o, "/r")
    assert.are.equal(5, #procs)
    local names = {}
    for i, p in ipairs(procs) do names[i] = p.name end
    assert.are.same({ "scheduler", "server 0", "server 1", "worker 0", "worker 1" }, names)
    for _, p in ipairs(procs) do
      local e = env_of(p)
      assert.are.equal("127.0.0.1", e.DMLC_PS_ROOT_URI)
      assert.are.equal("9999", e.DMLC_PS_ROOT_PORT)
      assert.are.equal("2", e.DMLC_NUM_WORKER)
      assert.are.equal("2", e.DMLC_NUM_SERVER)
      assert.are.equal(p.role, e.DMLC_ROLE)
    end
    assert.are.equal("1", procs[3].env.DMLC_SERVER_ID)
    assert.are.equal("1", procs[5].env.DMLC_WORKER_ID)
    assert.are.same({ "luajit", "t.lua" }, procs[4].argv)
    assert.are.same({ "/r/bin/mx", "-e", 'os.exit(require("mx.kvstore.ps_main").main())' }, procs[2].argv)
  end)

  it("builds ssh command lines: hosts round robin, quoted, variables per role", function()
    local o = L.parse { "-n", "2", "-s", "1", "--launcher", "ssh", "-H", "unused", "--root-uri", "10.0.0.1",
      "luajit", "my train.lua" }
    o.hosts = { "h1", "h2" }
    o.port = 9091
    local procs = L.plan(o, "/r", "/work dir")
    assert.are.equal(4, #procs)
    assert.are.equal("scheduler", procs[1].role) -- here, not through ssh
    assert.are.equal("10.0.0.1", procs[1].env.DMLC_PS_ROOT_URI)
    local s = procs[2].argv
    assert.are.same({ "ssh", "-o", "StrictHostKeyChecking=no", "-o", "BatchMode=yes", "h1" },
      { s[1], s[2], s[3], s[4], s[5], s[6] })
    assert.are.equal("cd '/work dir' && env DMLC_NODE_HOST=h1 DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=2 "
      .. "DMLC_PS_ROOT_PORT=9091 DMLC_PS_ROOT_URI=10.0.0.1 DMLC_ROLE=server DMLC_SERVER_ID=0 /r/bin/mx -e "
      .. "'os.exit(require(\"mx.kvstore.ps_main\").main())'", s[7])
    assert.are.equal("h2", procs[3].host)
    assert.are.equal("cd '/work dir' && env DMLC_NODE_HOST=h2 DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=2 "
      .. "DMLC_PS_ROOT_PORT=9091 DMLC_PS_ROOT_URI=10.0.0.1 DMLC_ROLE=worker DMLC_WORKER_ID=0 luajit "
      .. "'my train.lua'", procs[3].argv[7])
    assert.are.equal("h1", procs[4].host)
  end)

  it("reads hostfiles (comments, blank lines) and refuses empty ones", function()
    local f = os.tmpname()
    local h = io.open(f, "w")
    h:write("# cluster\nnode1 slots=4\n\n  node2  # second\n")
    h:close()
    assert.are.same({ "node1", "node2" }, L.read_hosts(f))
    h = io.open(f, "w")
    h:write("# nothing\n")
    h:close()
    local ok, e = pcall(L.read_hosts, f)
    assert.is_false(ok)
    assert.truthy(e.msg:find("lists no host"))
    os.remove(f)
  end)

  it("builds mpirun command lines for the servers and the workers", function()
    local o = L.parse { "-n", "4", "-s", "2", "--launcher", "mpi", "-H", "hosts.txt", "--root-uri", "head",
      "luajit", "t.lua" }
    o.port = 9091
    local procs = L.plan(o, "/r")
    assert.are.equal(3, #procs)
    assert.are.same({ "mpirun", "-n", "2", "--hostfile", "hosts.txt",
      "-x", "DMLC_NUM_SERVER=2", "-x", "DMLC_NUM_WORKER=4", "-x", "DMLC_PS_ROOT_PORT=9091",
      "-x", "DMLC_PS_ROOT_URI=head", "-x", "DMLC_ROLE=server",
      "/r/bin/mx", "-e", 'os.exit(require("mx.kvstore.ps_main").main())' }, procs[2].argv)
    assert.are.same({ "mpirun", "-n", "4", "--hostfile", "hosts.txt",
      "-x", "DMLC_NUM_SERVER=2", "-x", "DMLC_NUM_WORKER=4", "-x", "DMLC_PS_ROOT_PORT=9091",
      "-x", "DMLC_PS_ROOT_URI=head", "-x", "DMLC_ROLE=worker", "luajit", "t.lua" }, procs[3].argv)
  end)

  -- run_local on plain shell processes, in a child luajit (it blocks signals while running)
  local function run_procs(procs_src, sigint_after)
    local src = string.format([[
      local L = loadfile(%q)("as-module")
      io.stdout:setvbuf("line")
      os.exit(L.run_local(%s, { grace = 1 }))
    ]], J.root .. "/tools/launch.lua", procs_src)
    local f = os.tmpname()
    local h = io.open(f, "w")
    h:write(src)
    h:close()
    local cmd = "luajit " .. f .. " 2>&1; echo RC=$?"
    if sigint_after then
      cmd = string.format("luajit %s 2>&1 & LP=$!; sleep %g; kill -INT $LP; wait $LP; echo RC=$?",
        f, sigint_after)
    end
    local p = io.popen(cmd)
    local out = p:read("*a")
    p:close()
    os.remove(f)
    return tonumber(out:match("RC=(%d+)")), out
  end

  it("prefixes output, stops everyone at the first failure and returns its exit code", function()
    local t0 = J.now()
    local rc, out = run_procs([[{
      { role = "server", name = "server 0", env = {}, argv = { "sh", "-c", "echo $$; exec sleep 30" } },
      { role = "worker", name = "worker 0", env = { X = "42" },
        argv = { "sh", "-c", "echo hello $X; sleep 0.3; exit 3" } },
      { role = "worker", name = "worker 1", env = {}, argv = { "sh", "-c", "echo partial-line-no-newline" } },
    }]])
    assert.are.equal(3, rc, out)
    assert.is_true(J.now() - t0 < 10, out)
    assert.truthy(out:find("%[worker 0%] hello 42\n"), out)
    assert.truthy(out:find("%[worker 1%] partial%-line%-no%-newline"), out)
    assert.truthy(out:find("launch: worker 0 exited with code 3; stopping every process"), out)
    local spid = tonumber(out:match("%[server 0%] (%d+)"))
    assert.is_false(J.alive(spid), out)
  end)

  it("kills everything on SIGINT (Ctrl-C) and exits 130", function()
    local rc, out = run_procs([[{
      { role = "worker", name = "worker 0", env = {}, argv = { "sh", "-c", "echo $$; exec sleep 30" } },
      { role = "worker", name = "worker 1", env = {},
        argv = { "sh", "-c", "trap '' INT TERM; echo $$; while true; do sleep 0.1; done" } },
    }]], 1.5)
    assert.are.equal(130, rc, out)
    local n = 0
    for pid in out:gmatch("%] (%d+)\n") do
      n = n + 1
      assert.is_false(J.alive(tonumber(pid)), out)
    end
    assert.are.equal(2, n, out) -- both, the one ignoring SIGINT/SIGTERM too (SIGKILL)
    assert.truthy(out:find("launch: signal 2 received; stopping every process"), out)
  end)

  it("exits 2 with the usage on bad arguments", function()
    local p = io.popen("cd " .. J.sh_quote(J.root) .. " && luajit tools/launch.lua -n 0 x 2>&1; echo RC=$?")
    local out = p:read("*a")
    p:close()
    assert.truthy(out:find("launch: %-n WORKERS: a positive integer"), out)
    assert.truthy(out:find("usage: tools/launch.lua"), out)
    assert.truthy(out:find("RC=2"), out)
  end)
end)
