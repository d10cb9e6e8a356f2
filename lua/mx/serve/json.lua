-- mx.serve.json — JSON for handlers: decode(text) -> value | nil, message;
-- encode(value[, digits=9]) -> text; array([t]) marks a table as a JSON array (an empty
-- table encodes as {} otherwise); ordered{{key, value}, ...} an object whose keys keep
-- that order; null, the value JSON's null decodes to. The C half is
-- built into mx-serve-worker (tools/serve/lua_json.c, jansson), so this module exists in
-- the server's workers only.
local ok, J = pcall(require, "mx.serve._json")
if not ok then
  error("mx.serve.json: available inside mx-serve's workers only (its C half is part of "
    .. "mx-serve-worker)", 2)
end
return J
