-- Every file reader of the C API has a libFuzzer target (tools/fuzz/fuzz_<name>.c), and
-- each target's harness runs in CI without libFuzzer (build/fuzz_<name>_replay:
-- tools/fuzz/replay/replay.c) over seed files and thousands of their deterministic
-- mutations: a reader that crashes (a signal), or returns a status its harness refuses,
-- fails here. A new reader in mx.h without a target, or a target without seeds below,
-- fails the first two cases: the fuzzing grows with the formats. Long campaigns under
-- ASan + libFuzzer: docs/file-formats.md "Fuzzing".
local MUTATIONS = tonumber(os.getenv("MX_FUZZ_REPLAY_MUTATIONS") or "") or 20000

local function read(p)
  local f = assert(io.open(p, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end
local function ls(glob)
  local out = {}
  for l in io.popen("ls " .. glob .. " 2>/dev/null"):lines() do out[#out + 1] = l end
  return out
end

-- seeds per target (a glob list, or a function making files); max_len as the target's
-- libFuzzer runs use; the mutations when not MUTATIONS
local SEEDS = {
  fuzz_ndload = { "spec/fixtures/*.params spec/fixtures/*.npy spec/fixtures/*.npz", 4096 },
  fuzz_symjson = { "spec/fixtures/*-symbol.json", 16384 },
  fuzz_recordio = { "spec/fixtures/*.rec", 8192 },
  fuzz_imdecode = { "spec/fixtures/images/small_*.png spec/fixtures/images/*.jpg", 8192 },
  fuzz_safetensors = { "spec/fixtures/*.safetensors", 4096 },
  -- (byte 0 picks the parser: v2 requests against four signatures, JSON bodies)
  fuzz_serve = { "spec/fixtures/fuzz_serve/*.seed", 4096 },
  fuzz_torchfile = { "spec/fixtures/pt_*.pt", 8192 },
  -- (each input imports a graph: fewer mutations)
  fuzz_onnx = { "spec/fixtures/onnx_ext/*.onnx "
    .. "/usr/share/libonnx-testdata/data/simple/test_s*_model/model.onnx "
    .. "/usr/share/libonnx-testdata/data/node/test_conv_with_strides_padding/model.onnx "
    .. "spec/fixtures/onnx_loops/*/model.onnx spec/fixtures/onnx_loops/runtime_cond.onnx", 4096, 3000 },
  fuzz_idx = { function(dir)
    -- IDX: magic 0 0 <type> <ndim>, big-endian u32 dims, then the data
    local function be32(v)
      return string.char(math.floor(v / 2 ^ 24) % 256, math.floor(v / 2 ^ 16) % 256,
        math.floor(v / 2 ^ 8) % 256, v % 256)
    end
    local files = {}
    local function put(name, bytes)
      local p = dir .. "/" .. name
      local f = assert(io.open(p, "wb"))
      f:write(bytes)
      f:close()
      files[#files + 1] = p
    end
    local px = {}
    for i = 1, 2 * 3 * 4 do px[i] = string.char(i * 7 % 256) end
    put("u8.idx", "\0\0\8\3" .. be32(2) .. be32(3) .. be32(4) .. table.concat(px))
    put("labels.idx", "\0\0\8\1" .. be32(5) .. "\1\2\3\4\5")
    put("f32.idx", "\0\0\13\1" .. be32(2) .. "\63\128\0\0\64\0\0\0")
    os.execute("gzip -c " .. dir .. "/u8.idx > " .. dir .. "/u8.idx.gz")
    files[#files + 1] = dir .. "/u8.idx.gz"
    return files
  end, 4096 },
}

-- The C readers: functions of the public headers (mx.h's FFI region, the runtime's
-- mx_runtime.h, MXNet's c_predict_api.h, the tokenizers' mx_text.h) that take the bytes
-- of a file or a text (a buffer and its length, or JSON text), and the path-taking
-- readers of mx.h, which each need a _bytes twin to be fuzzable.
local HEADERS = { "core/include/mx.h", "core/include/mx_runtime.h", "core/include/mxnet/c_predict_api.h",
  "core/text/mx_text.h" }
local function readers()
  local bytes, paths = {}, {}
  for _, hp in ipairs(HEADERS) do
    local f = io.open(hp, "rb")
    if f then
      local h = f:read("*a")
      f:close()
      h = h:match("MX_FFI_BEGIN(.*)MX_FFI_END") or h
      for name, args in h:gmatch("int%s+([%w_]+)%s*(%b())%s*;") do
        if args:find("const void %*%w+,%s*size_t") or args:find("const char %*json")
          or (hp:find("mx_text") and args:find("const char %*%w+,%s*size_t"))
          or args:find("const char %*symbol_json") or args:find("const void %*%w+,%s*int %w*size")
          or args:find("const char %*[%w_]*bytes,%s*int") then
          bytes[#bytes + 1] = name
        elseif hp:find("mx%.h$") and args:find("^%(const char %*path")
          and (name:find("_load$") or name:find("_open$")) then
          paths[#paths + 1] = name
        end
      end
    end
  end
  return bytes, paths
end

-- seeds of fuzz_rtmodel: the exported fixture models, packed as its harness reads them
-- (4-byte length of the JSON, ndim - 1, each dim - 1, the JSON, the .params)
local function rt_seeds(dir)
  local mx = require("mx")
  local files = {}
  for _, n in ipairs({ "mlp", "cnn", "symcnn" }) do
    local base = "spec/fixtures/export_" .. n
    local j, p = read(base .. "-symbol.json"), read(base .. "-0000.params")
    local io_ = mx.nd.load("spec/fixtures/export_" .. n .. "_io.params")
    local x = io_.x or io_.data
    local sh = x and x:shape() or { 1, 3, 8, 8 }
    local head = { string.char(#j % 256, math.floor(#j / 256) % 256, math.floor(#j / 65536) % 256, 0,
      #sh - 1) }
    for _, d in ipairs(sh) do head[#head + 1] = string.char((d - 1) % 64) end
    local path = dir .. "/" .. n .. ".seed"
    local f = assert(io.open(path, "wb"))
    f:write(table.concat(head), j, p)
    f:close()
    files[#files + 1] = path
  end
  return files
end
SEEDS.fuzz_rtmodel = { rt_seeds, 65536, 3000 } -- (each input builds and runs a model)

-- seeds of fuzz_text: VOCAB "\0\0" TEXT (and TEXT alone), texts with what the BERT
-- cleaner and GPT-2's pattern treat apart: accents, CJK, punctuation, control
-- characters, whitespace runs, contractions, a truncated UTF-8 sequence
local TEXTS = {
  "Hello, world! The unbelievable things we've seen.",
  "Ça été naïve — Ünïcödé   spaces\t\ttabs\r\nand newlines",
  "中文字符和English混合, 日本語のテキスト。",
  "ctrl\1\2\127 nul\0inside \239\191\189 replacement, emoji \240\159\152\128!",
  "I'll they're 123 4567 ...!!! ??",
  "bad utf-8: \195 and \226\130",
}
SEEDS.fuzz_text = { function(dir)
  local vocab = "[UNK]\n[CLS]\nhello\nworld\n##s\nthe\nun\n##believ\n##able\n,\n!\nth\nhe\n中\n"
  local files = {}
  for k, t in ipairs(TEXTS) do
    for _, v in ipairs({ vocab .. "\0\0", "" }) do
      local p = dir .. "/text" .. k .. (v == "" and "" or "v") .. ".seed"
      local f = assert(io.open(p, "wb"))
      f:write(v, t)
      f:close()
      files[#files + 1] = p
    end
  end
  return files
end, 1024 }


describe("fuzzing of the file readers", function()
  local targets = {}
  for _, f in ipairs(ls("tools/fuzz/fuzz_*.c")) do targets[f:match("(fuzz_[%w_]+)%.c$")] = read(f) end

  it("every C reader of a file's bytes is called by a libFuzzer target; path readers have a "
    .. "bytes twin", function()
    local bytes, paths = readers()
    assert.is_true(#bytes >= 8, "found only " .. #bytes .. " byte readers: " .. table.concat(bytes, ", "))
    print("byte readers: " .. table.concat(bytes, ", "))
    local missing = {}
    for _, fn in ipairs(bytes) do
      local hit = false
      for _, src in pairs(targets) do if src:find(fn .. "%s*%(") then hit = true end end
      -- writers take bytes too; attribute parsers read no file; a variant named after a
      -- reader a target calls (MXPredCreateEx, ...PartialOut) runs that reader
      local reader = not (fn:find("write") or fn:find("encode") or fn:find("save")
        or fn:find("params_parse") or fn:find("set_input") or fn:find("bind_") or fn:find("get_output"))
      for _, src in pairs(targets) do
        for called in src:gmatch("([%w_]+)%s*%(") do
          if #called >= 8 and fn ~= called and fn:sub(1, #called) == called then hit = true end
        end
      end
      if not hit and reader then missing[#missing + 1] = fn end
    end
    assert.are.same({}, missing)
    local h = read("core/include/mx.h")
    local lone = {}
    for _, fn in ipairs(paths) do
      local twin = fn .. "_bytes"
      if not h:find(twin .. "%s*%(") then lone[#lone + 1] = fn end
    end
    assert.are.same({}, lone)
  end)

  it("every target has replay seeds here", function()
    local none = {}
    for name in pairs(targets) do if not SEEDS[name] then none[#none + 1] = name end end
    table.sort(none)
    assert.are.same({}, none)
  end)

  local names = {}
  for name in pairs(targets) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local nmut = SEEDS[name] and SEEDS[name][3] or MUTATIONS
    it(name .. ": its harness over the seeds and " .. nmut .. " mutations of them", function()
      local bin = "build/" .. name .. "_replay"
      if name == "fuzz_text" and not io.open(bin, "rb")
          and not io.open("build/lib/mx/libmx_text.so", "rb") then
        pending("libmx_text is not built (libutf8proc-dev, libpcre2-dev: tools/setup.sh)")
        return
      end
      if name == "fuzz_serve" and not io.open(bin, "rb") and not io.open("build/mx-serve", "rb") then
        pending("mx-serve is not built (libmicrohttpd-dev, libarchive-dev: tools/setup.sh)")
        return
      end
      assert.is_not_nil(io.open(bin, "rb"), bin .. " is missing: build with cmake (not MX_FUZZ)")
      local s = SEEDS[name]
      assert.is_not_nil(s, "no seeds")
      local dir = os.tmpname()
      os.remove(dir)
      os.execute("mkdir -p " .. dir)
      local files = type(s[1]) == "function" and s[1](dir) or ls(s[1])
      assert.is_true(#files > 0, "no seed file for " .. name)
      local p = io.popen(string.format("cd %s && %s/%s -mutate %d -seed 1 -max_len %d %s 2>&1; "
        .. "echo \"EXIT=$?\"", dir, os.getenv("PWD") or ".", bin, nmut, s[2], (function()
          local abs = {}
          for i, f in ipairs(files) do abs[i] = f:sub(1, 1) == "/" and f or (os.getenv("PWD") .. "/" .. f) end
          return table.concat(abs, " ")
        end)()))
      local out = p:read("*a")
      p:close()
      local crash = ls(dir .. "/fuzz-replay-crash-*")
      local kept = #crash > 0 and ("/tmp/" .. name .. "-replay-crash") or nil
      if kept then os.execute("cp " .. crash[1] .. " " .. kept) end
      os.execute("rm -rf " .. dir)
      assert.truthy(out:find("EXIT=0", 1, true), out .. (kept and ("\nthe input: " .. kept) or ""))
      assert.truthy(out:find("replayed " .. (#files + nmut) .. " inputs", 1, true), out)
    end)
  end
end)
