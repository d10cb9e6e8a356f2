-- ONNX string tensors (docs/onnx.md, "Strings"): mx.onnx.strings, TensorProto string
-- data in and out of .pb files, and models of string ops (StringNormalizer) run against
-- ONNX Runtime's outputs (spec/fixtures/onnx_strings/, tools/fixtures/make_onnx_strings.py:
-- non-ASCII case changes, case-insensitive stopwords, both input ranks, all removed).
local mx = require("mx")
local onnx = mx.onnx
local case = require("helpers.onnx_case")

local FIX = "spec/fixtures/onnx_strings/"
local DATA = "/usr/share/libonnx-testdata/data/"

local function have(p)
  local f = io.open(p, "rb")
  if f then f:close() end
  return f ~= nil
end

local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok)
  return tostring(e)
end

describe("ONNX strings", function()
  it("run StringNormalizer models as ONNX Runtime does", function()
    for _, name in ipairs { "upper_insensitive_utf8", "lower_sensitive_utf8", "none_insensitive",
      "none_sensitive", "all_dropped_twodim", "no_stopwords_upper" } do
      local r = case(FIX .. name)
      assert.equals("pass", r.status, name .. ": " .. tostring(r.why))
    end
    -- and the values themselves: the UTF-8 case change and the [1, C] shape
    local sess = onnx.load_model(FIX .. "upper_insensitive_utf8/model.onnx")
    assert.same({ "x" }, sess.input_names)
    assert.same({ "y" }, sess.output_names)
    local y = sess:run { x = onnx.strings({ "Straße", "monday", "ça" }, { 1, 3 }) }[1]
    assert.same({ 1, 1 }, y:shape())
    assert.same({ "ÇA" }, y:tolist())
    assert.equals("string", y:dtype())
  end)

  it("passes libonnx-testdata's StringNormalizer cases", function()
    local dir = DATA .. "simple/test_strnorm_model_monday_insensintive_upper_twodim"
    if not have(dir .. "/model.onnx") then pending("libonnx-testdata is not installed") return end
    assert.equals("pass", case(dir).status)
    local meta = onnx.get_model_metadata(dir .. "/model.onnx")
    assert.equals("string", meta.input_tensor_data[1][3])
    local x, name = onnx.load_tensor(dir .. "/test_data_set_0/input_0.pb")
    assert.is_true(onnx.is_strings(x))
    assert.equals("x", name)
    assert.same({ 1, 6 }, x:shape())
    assert.equals("Monday", x:tolist()[1])
  end)

  it("writes and reads TensorProto files of strings and of numbers", function()
    local p = os.tmpname()
    local vals = { "a\0b", "", "éß→", string.rep("z", 1000) }
    onnx.save_tensor(p, onnx.strings(vals, { 2, 2 }), "words")
    local t, name = onnx.load_tensor(p)
    assert.equals("words", name)
    assert.same({ 2, 2 }, t:shape())
    assert.same(vals, t:tolist())
    local x = mx.nd.array({ { 1.5, -2 }, { 3, 4 } })
    onnx.save_tensor(p, x)
    local y, yn = onnx.load_tensor(p)
    assert.equals("", yn)
    assert.same(x:shape(), y:shape())
    assert.same(x:tolist(), y:tolist())
    onnx.save_tensor(p, mx.nd.array({ 7, 8 }, { dtype = "int64" }), "i")
    assert.same({ 7, 8 }, onnx.load_tensor(p):tolist())
    os.remove(p)
    assert.matches("save_tensor: t must be an NDArray or a string tensor", err_of(onnx.save_tensor, p, {}))
  end)

  it("rejects every truncation and byte flip of a string tensor file and model cleanly", function()
    local B = require("helpers.bytes")
    local p = os.tmpname()
    local n = 0
    local sources = { FIX .. "upper_insensitive_utf8/test_data_set_0/input_0.pb",
      FIX .. "upper_insensitive_utf8/model.onnx" }
    for si, src in ipairs(sources) do
      local s = B.read(src)
      for k = 0, #s - 1 do
        for _, bytes in ipairs { s:sub(1, k), B.patch(s, k, string.char((s:byte(k + 1) + 0x41) % 256)) } do
          B.write(p, bytes)
          local ok, err
          if si == 1 then
            ok, err = pcall(onnx.load_tensor, p)
          else
            ok, err = pcall(function()
              local sess = onnx.load_model(p)
              return sess:run { x = onnx.strings({ "a", "b", "c", "d", "e", "f" }, { 1, 6 }) }
            end)
          end
          if not ok then assert.matches("onnx", tostring(err), 1, true) end
          n = n + 1
        end
      end
    end
    os.remove(p)
    assert.is_true(n > 400)
  end)

  it("checks string tensors as they are made", function()
    assert.same({ 3 }, onnx.strings({ "a", "b", "c" }):shape())
    assert.same({ 0 }, onnx.strings({}):shape())
    assert.matches("mx.onnx.strings: values%[2%] is a number", err_of(onnx.strings, { "a", 1 }))
    assert.matches("shape %(2,2%) holds 4 strings, values has 3",
      err_of(onnx.strings, { "a", "b", "c" }, { 2, 2 }))
    assert.matches("shape%[1%] must be a non%-negative integer", err_of(onnx.strings, { "a" }, { -1 }))
    local e = err_of(function() onnx.strings(5) end)
    assert.matches("onnx_strings_spec.lua", e) -- at the caller's line
  end)

  it("says what is wrong with the inputs, the locale and mixed models", function()
    local sess = onnx.load_model(FIX .. "lower_sensitive_utf8/model.onnx")
    assert.matches("run: input 'x' must be a string tensor %(mx.onnx.strings%), got an NDArray",
      err_of(sess.run, sess, { x = mx.nd.zeros { 2 } }))
    assert.matches("node 'lower_sensitive_utf8' %(StringNormalizer%): the input must be of shape "
      .. "%[C%] or %[1, C%], got rank 3",
      err_of(sess.run, sess, { x = onnx.strings({ "a", "b" }, { 1, 1, 2 }) }))
    assert.matches("first dim != 1", err_of(sess.run, sess, { x = onnx.strings({ "a", "b" }, { 2, 1 }) }))
    assert.matches("an input string is not UTF%-8",
      err_of(sess.run, sess, { x = onnx.strings({ "ok", "\255\254" }) }))
    local bad = onnx.load_model(FIX .. "errors/bad_locale.onnx")
    assert.matches("node 'norm' %(StringNormalizer%): unsupported: locale 'xx_NOWHERE' is not installed",
      err_of(bad.run, bad, { x = onnx.strings({ "a", "b" }) }))
    -- a string value read by a numeric op: the graph importer refuses the string input
    assert.matches("input 'x': unsupported: a string tensor in a luamx graph",
      err_of(onnx.load_model, FIX .. "errors/mixed.onnx"))
    assert.matches("input 'x': unsupported: a string tensor",
      err_of(onnx.import_model, FIX .. "errors/mixed.onnx"))
    -- strings throughout, but an op the string runner does not have
    local other = onnx.load_model(FIX .. "errors/other_op.onnx")
    assert.matches("node 'uniq' %(Unique%): unsupported: string values meet an op other than "
      .. "StringNormalizer",
      err_of(other.run, other, { x = onnx.strings({ "a", "b" }) }))
  end)
end)
