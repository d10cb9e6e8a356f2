std = "luajit"
max_line_length = 110
files["spec"] = { std = "+busted" }
exclude_files = { "build*/**", "tree/**", "spec/fixtures/**" }
-- grad formulas share one signature (F, inputs, outputs, ograds, p): unused ones are fine
-- (the op table: its index core/ops/optable.lua and the family files core/ops/<family>.lua,
-- also reached through the checkout's symlink lua/mx/core/ops)
files["core/ops"] = { unused_args = false }
files["lua/mx/core/ops"] = { unused_args = false }
-- an empty branch holding a comment documents a deliberate no-op
ignore = { "542" }
