std = "luajit"
max_line_length = 110
files["spec"] = { std = "+busted" }
exclude_files = { "build*/**", "tree/**", "spec/fixtures/**" }
-- grad formulas share one signature (F, inputs, outputs, ograds, p): unused ones are fine
files["core/ops/optable.lua"] = { unused_args = false }
files["lua/mx/_optable.lua"] = { unused_args = false }
-- an empty branch holding a comment documents a deliberate no-op
ignore = { "542" }
