-- mx.gluon.model_zoo.model_store — where pretrained weights are found: MXNet's model-store
-- layout, <root>/<name>-<first 8 hex digits of its sha1>.params, root
-- $MXNET_HOME/models or ~/.mxnet/models (mxnet.gluon.model_zoo.model_store and
-- gluoncv.model_zoo.model_store). luamx never downloads: a file that is not there is an
-- error saying which file to put where; a file whose SHA-1 differs from the store's is an
-- error too (MXNet would download it again). The SHA-1 comes from OpenSSL's libcrypto.
--
--   local store = require("mx.gluon.model_zoo.model_store")
--   local path = store.get_model_file("resnet18_v1")                -- MXNet's weights
--   local path = store.get_model_file("resnet50_v1b", { store = "gluoncv" })
local ffi = require("ffi")
local check_opts = require("mx.core.class").check_opts

local type, error, tostring, format = type, error, tostring, string.format

local M = {}

-- The two stores' hashes for the networks luamx builds: MXNet 1.9.1's model_store.py
-- (all of it) and GluonCV 0.10's (its entries for these networks).
local MXNET = {
  ["alexnet"] = "44335d1f0046b328243b32a26a4fbd62d9057b45",
  ["densenet121"] = "f27dbf2dbd5ce9a80b102d89c7483342cd33cb31",
  ["densenet161"] = "b6c8a95717e3e761bd88d145f4d0a214aaa515dc",
  ["densenet169"] = "2603f878403c6aa5a71a124c4a3307143d6820e9",
  ["densenet201"] = "1cdbc116bc3a1b65832b18cf53e1cb8e7da017eb",
  ["inceptionv3"] = "ed47ec45a937b656fcc94dabde85495bbef5ba1f",
  ["mobilenet0.25"] = "9f83e440996887baf91a6aff1cccc1c903a64274",
  ["mobilenet0.5"] = "8e9d539cc66aa5efa71c4b6af983b936ab8701c3",
  ["mobilenet0.75"] = "529b2c7f4934e6cb851155b22c96c9ab0a7c4dc2",
  ["mobilenet1.0"] = "6b8c5106c730e8750bcd82ceb75220a3351157cd",
  ["mobilenetv2_0.25"] = "ae8f9392789b04822cbb1d98c27283fc5f8aa0a7",
  ["mobilenetv2_0.5"] = "aabd26cd335379fcb72ae6c8fac45a70eab11785",
  ["mobilenetv2_0.75"] = "e2be7b72a79fe4a750d1dd415afedf01c3ea818d",
  ["mobilenetv2_1.0"] = "36da4ff1867abccd32b29592d79fc753bca5a215",
  ["resnet101_v1"] = "d988c13d6159779e907140a638c56f229634cb02",
  ["resnet101_v2"] = "18e93e4f48947e002547f50eabbcc9c83e516aa6",
  ["resnet152_v1"] = "671c637a14387ab9e2654eafd0d493d86b1c8579",
  ["resnet152_v2"] = "f2695542de38cf7e71ed58f02893d82bb409415e",
  ["resnet18_v1"] = "a0666292f0a30ff61f857b0b66efc0228eb6a54b",
  ["resnet18_v2"] = "a81db45fd7b7a2d12ab97cd88ef0a5ac48b8f657",
  ["resnet34_v1"] = "48216ba99a8b1005d75c0f3a0c422301a0473233",
  ["resnet34_v2"] = "9d6b80bbc35169de6b6edecffdd6047c56fdd322",
  ["resnet50_v1"] = "0aee57f96768c0a2d5b23a6ec91eb08dfb0a45ce",
  ["resnet50_v2"] = "ecdde35339c1aadbec4f547857078e734a76fb49",
  ["squeezenet1.0"] = "264ba4970a0cc87a4f15c96e25246a1307caf523",
  ["squeezenet1.1"] = "33ba0f93753c83d86e1eb397f38a667eaf2e9376",
  ["vgg11"] = "dd221b160977f36a53f464cb54648d227c707a05",
  ["vgg11_bn"] = "ee79a8098a91fbe05b7a973fed2017a6117723a8",
  ["vgg13"] = "6bc5de58a05a5e2e7f493e2d75a580d83efde38c",
  ["vgg13_bn"] = "7d97a06c3c7a1aecc88b6e7385c2b373a249e95e",
  ["vgg16"] = "e660d4569ccb679ec68f1fd3cce07a387252a90a",
  ["vgg16_bn"] = "7f01cf050d357127a73826045c245041b0df7363",
  ["vgg19"] = "ad2f660d101905472b83590b59708b71ea22b2e5",
  ["vgg19_bn"] = "f360b758e856f1074a85abd5fd873ed1d98297c3",
}
local GLUONCV = {
  ["alexnet"] = "44335d1f0046b328243b32a26a4fbd62d9057b45",
  ["darknet53"] = "2189ea49720a116dead245b9b252301cffa18d28",
  ["deeplab_resnet101_ade"] = "bf1584dfcec12063eff3075ee643e181c0f6d443",
  ["deeplab_resnet101_coco"] = "ed817f76086abb4c3404af62ec1b5487c67642b7",
  ["deeplab_resnet101_voc"] = "311ed22c63f3ac28b5f1e1663c458f26600e62da",
  ["deeplab_resnet50_ade"] = "c7789b237adc7253405bee57c84d53b15db45942",
  ["densenet121"] = "f27dbf2dbd5ce9a80b102d89c7483342cd33cb31",
  ["densenet161"] = "b6c8a95717e3e761bd88d145f4d0a214aaa515dc",
  ["densenet169"] = "2603f878403c6aa5a71a124c4a3307143d6820e9",
  ["densenet201"] = "1cdbc116bc3a1b65832b18cf53e1cb8e7da017eb",
  ["faster_rcnn_resnet50_v1b_coco"] = "5b4690fb7c5b62c44fb36c67d0642b633697f1bb",
  ["faster_rcnn_resnet50_v1b_voc"] = "447328d89d70ae1e2ca49226b8d834e5a5456df3",
  ["fcn_resnet101_ade"] = "d544440a35586f662ed1a5405ab9aa89cd750558",
  ["fcn_resnet101_coco"] = "766cdf9cc3e5b980b141643f054db5b48863f634",
  ["fcn_resnet101_voc"] = "12c2b9b3be7d4e133e52477150a9b3e616626a82",
  ["fcn_resnet50_ade"] = "3479525af7bdbf345e74e150aaae2e48174c0c5f",
  ["inceptionv3"] = "a5050dbcbfc54908fc1b7700698eb7ffbc150417",
  ["inceptionv3_kinetics400"] = "8a4a6946893de23937b5e5e4a1a449800d57ff71",
  ["inceptionv3_ucf101"] = "13ef5c3bd40141f11c5b4e471f8f2ad0c1ac6299",
  ["mobilenet0.25"] = "f0046a3da4e150b85da58ea31913dbb86e7540d1",
  ["mobilenet0.5"] = "0130d2aa2f7e3a63db35579b243e25f512172371",
  ["mobilenet0.75"] = "84c801e27b1ac5040b6e945c0d1f8d49e9a59f3d",
  ["mobilenet1.0"] = "efbb2ca3881998d5a8c5cb6c457a28c1e085fed5",
  ["mobilenetv2_0.25"] = "9b1d2cc38fed4cd171a7f7a0d17fe1a905573887",
  ["mobilenetv2_0.5"] = "0803818513599fa1329524ee3607b708b4a4630f",
  ["mobilenetv2_0.75"] = "b56e3d1c33eb52d0b90678db4ce6c5ca6c9a6704",
  ["mobilenetv2_1.0"] = "f9952bcde7a7982947ac5240546e1c1c8f057370",
  ["mobilenetv3_large"] = "eaa44578554ddffaf2a2630ced9093181ff79688",
  ["mobilenetv3_small"] = "10430433698d18f49991e4a366c9fce8f9286298",
  ["resnet101_v1"] = "d988c13d6159779e907140a638c56f229634cb02",
  ["resnet101_v1b"] = "a455932aa95cb7dcfa05fd040b9b5a5660733c39",
  ["resnet101_v2"] = "18e93e4f48947e002547f50eabbcc9c83e516aa6",
  ["resnet152_v1"] = "acfd09703b113143af9c33898bad8b6154fd6fb0",
  ["resnet152_v1b"] = "a5a61ee1ce5ab7c09720775b223360f3c60e211d",
  ["resnet152_v2"] = "f2695542de38cf7e71ed58f02893d82bb409415e",
  ["resnet18_v1"] = "a0666292f0a30ff61f857b0b66efc0228eb6a54b",
  ["resnet18_v1b"] = "2d9d980c990442f826f20781ed039851e78dabe3",
  ["resnet18_v2"] = "a81db45fd7b7a2d12ab97cd88ef0a5ac48b8f657",
  ["resnet34_v1"] = "48216ba99a8b1005d75c0f3a0c422301a0473233",
  ["resnet34_v1b"] = "8e16b84814e84f64d897854003f049872991eaa6",
  ["resnet34_v2"] = "9d6b80bbc35169de6b6edecffdd6047c56fdd322",
  ["resnet50_v1"] = "cc729d95031ca98cf2ff362eb57dee4d9994e4b2",
  ["resnet50_v1b"] = "0ecdba34691be172036ddf244ff1b2eade75ffde",
  ["resnet50_v2"] = "ecdde35339c1aadbec4f547857078e734a76fb49",
  ["resnext101_32x4d"] = "8654ca5d0ba30a7868c5b42a7d4cc0ff2ba04dbc",
  ["resnext101_64x4d"] = "2f0d1c9d343d140775bfa7548dd3a881a35855de",
  ["resnext50_32x4d"] = "4ecf62e29336e0cbc5a2f844652635a330928b5a",
  ["se_resnext101_32x4d"] = "688e238985d45a38803c62cf345af2813d0e8aa0",
  ["se_resnext101_64x4d"] = "11c50114a0483e27e74dc4236904254ef05b634b",
  ["se_resnext50_32x4d"] = "7906e0e16013ef8d195cbc05463cc37783ec7a8a",
  ["squeezenet1.0"] = "264ba4970a0cc87a4f15c96e25246a1307caf523",
  ["squeezenet1.1"] = "33ba0f93753c83d86e1eb397f38a667eaf2e9376",
  ["ssd_300_vgg16_atrous_coco"] = "b302ad8a8660345c368448141d8acf30b5a3801d",
  ["ssd_300_vgg16_atrous_voc"] = "0e169fbb64efdee6985c3c175ec4298c4bda0298",
  ["ssd_512_mobilenet1.0_coco"] = "da9756faa5b9b4e34dedcf83ee0733d5895796ad",
  ["ssd_512_mobilenet1.0_voc"] = "37c180765a4eb3e67751d6bacac47bb9156f5fff",
  ["ssd_512_resnet50_v1_coco"] = "c48351620d4f0cbc49e4f7a84c8e67ef8fdc6e09",
  ["ssd_512_resnet50_v1_voc"] = "9c8b225a552614e4284a0f647331bfdc6940eb4a",
  ["ssd_512_vgg16_atrous_coco"] = "5c86064290c05eccbdd88475376c71c595c8325c",
  ["ssd_512_vgg16_atrous_voc"] = "daf8181b615b480236fcb8474545077891276945",
  ["vgg11"] = "dd221b160977f36a53f464cb54648d227c707a05",
  ["vgg11_bn"] = "ee79a8098a91fbe05b7a973fed2017a6117723a8",
  ["vgg13"] = "6bc5de58a05a5e2e7f493e2d75a580d83efde38c",
  ["vgg13_bn"] = "7d97a06c3c7a1aecc88b6e7385c2b373a249e95e",
  ["vgg16"] = "e660d4569ccb679ec68f1fd3cce07a387252a90a",
  ["vgg16_atrous"] = "4fa2e1ad96b8c8d1ba9e5a43556cd909d70b3985",
  ["vgg16_bn"] = "7f01cf050d357127a73826045c245041b0df7363",
  ["vgg16_ucf101"] = "d6dc1bbaaf3cbe0be19f02362706393f62ce76fa",
  ["vgg19"] = "ad2f660d101905472b83590b59708b71ea22b2e5",
  ["vgg19_bn"] = "f360b758e856f1074a85abd5fd873ed1d98297c3",
  ["yolo3_darknet53_coco"] = "09767802230b45af1c27697a2dad6d1ebaacc1e2",
  ["yolo3_darknet53_voc"] = "f5ece5ce1422eeca3ce2908004e469ffdf91fd41",
  ["yolo3_mobilenet1.0_coco"] = "66dbbae67be8f1e3cd3c995ce626a2bdc89769c6",
  ["yolo3_mobilenet1.0_voc"] = "3b47835ac3dd80f29576633949aa58aee3094353",
}
M.STORES = { mxnet = MXNET, gluoncv = GLUONCV }

local function default_root()
  local home = os.getenv("MXNET_HOME")
  if home and home ~= "" then return home .. "/models" end
  return (os.getenv("HOME") or "~") .. "/.mxnet/models"
end
M.default_root = default_root

local function expand(root)
  if root:sub(1, 2) == "~/" then root = (os.getenv("HOME") or "~") .. root:sub(2) end
  return root
end

-- sha1_file(path): the file's SHA-1 as 40 hex digits (libcrypto's EVP digest), or nil
-- and a message when libcrypto cannot be loaded.
local crypto
ffi.cdef [[
  typedef struct evp_md_ctx_st EVP_MD_CTX;
  typedef struct evp_md_st EVP_MD;
  EVP_MD_CTX *EVP_MD_CTX_new(void);
  void EVP_MD_CTX_free(EVP_MD_CTX *ctx);
  const EVP_MD *EVP_sha1(void);
  int EVP_DigestInit_ex(EVP_MD_CTX *ctx, const EVP_MD *type, void *impl);
  int EVP_DigestUpdate(EVP_MD_CTX *ctx, const void *d, size_t cnt);
  int EVP_DigestFinal_ex(EVP_MD_CTX *ctx, unsigned char *md, unsigned int *s);
]]
local function sha1_file(path)
  if crypto == nil then
    for _, name in ipairs { "libcrypto.so.3", "crypto" } do
      local ok, lib = pcall(ffi.load, name)
      if ok then crypto = lib break end
    end
    crypto = crypto or false
  end
  if not crypto then return nil, "libcrypto (Debian's libssl3) cannot be loaded" end
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local ctx = crypto.EVP_MD_CTX_new()
  crypto.EVP_DigestInit_ex(ctx, crypto.EVP_sha1(), nil)
  while true do
    local chunk = f:read(1048576)
    if not chunk then break end
    crypto.EVP_DigestUpdate(ctx, chunk, #chunk)
  end
  f:close()
  local md, n = ffi.new("unsigned char[64]"), ffi.new("unsigned int[1]")
  crypto.EVP_DigestFinal_ex(ctx, md, n)
  crypto.EVP_MD_CTX_free(ctx)
  local hex = {}
  for i = 0, n[0] - 1 do hex[#hex + 1] = format("%02x", md[i]) end
  return table.concat(hex)
end
M.sha1_file = sha1_file

local function lookup(who, name, store, level)
  local hashes = M.STORES[store]
  if not hashes then
    error(format("%s: store must be 'mxnet' or 'gluoncv', got %s", who, tostring(store)),
      level + 1)
  end
  local sha1 = type(name) == "string" and hashes[name]
  if not sha1 then
    error(format("%s: no pretrained weights for '%s' in %s's model store", who,
      tostring(name), store == "mxnet" and "MXNet" or "GluonCV"), level + 1)
  end
  return sha1
end

-- short_hash(name, {store="mxnet"}): the 8 hex digits in the store's file name.
function M.short_hash(name, opts)
  local o = check_opts("short_hash", opts, { store = true }, 2)
  return (lookup("short_hash", name, o.store or "mxnet", 2):sub(1, 8))
end

-- get_model_file(name, {root=, store="mxnet"|"gluoncv", check_sha1=true}): the path of
-- <root>/<name>-<short hash>.params after checking it is there and has the store's SHA-1.
function M.get_model_file(name, opts, level)
  level = (level or 1) + 1
  local o = check_opts("get_model_file", opts, { root = true, store = true, check_sha1 = true },
    level)
  local sha1 = lookup("get_model_file", name, o.store or "mxnet", level)
  local root = o.root
  if root ~= nil and (type(root) ~= "string" or root == "") then
    error("get_model_file: root must be a non-empty string, got " .. tostring(root), level)
  end
  root = expand(root or default_root())
  local file = format("%s-%s.params", name, sha1:sub(1, 8))
  local path = root:gsub("/+$", "") .. "/" .. file
  local f = io.open(path, "rb")
  if not f then
    error(format("get_model_file: pretrained weights for '%s' are not here: put %s's model-store "
      .. "file %s (sha1 %s) in %s (luamx never downloads)", name,
      o.store == "gluoncv" and "GluonCV" or "MXNet", file, sha1, root), level)
  end
  f:close()
  if o.check_sha1 ~= false then
    local got, err = sha1_file(path)
    if not got then
      error(format("get_model_file: cannot check %s: %s (pass {check_sha1=false} to skip)",
        path, tostring(err)), level)
    end
    if got ~= sha1 then
      error(format("get_model_file: %s has sha1 %s, the model store's is %s (a different or "
        .. "damaged file)", path, got, sha1), level)
    end
  end
  return path
end

return M
