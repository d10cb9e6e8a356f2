-- mx.gluoncv.data.transforms.rng — the random source of the training transforms. GluonCV
-- draws from Python's `random` and NumPy's global generators; here every random transform
-- takes an rng with three kinds of draw (a default one when none is given):
--   rng:uniform(a, b)   a float in [a, b)
--   rng:randint(a, b)   an integer in [a, b], both ends included
--   rng:bernoulli(p)    true with probability p
-- and, built on them, rng:normal(), rng:gamma(k) and rng:beta(a, b) (mixup's ratio).
-- Rng(seed) is L'Ecuyer's MRG32k3a (exact in doubles, its own state, so a seeded dataset or
-- transform does not depend on math.random); Replay(draws) returns recorded draws in order
-- and checks each call's kind and arguments (the specs replay GluonCV's).
local floor = math.floor

local M = {}

local M1, M2 = 4294967087, 4294944443
local A12, A13, A21, A23 = 1403580, 810728, 527612, 1370589
local NORM = 1 / (M1 + 1)

local Rng = {}
Rng.__index = Rng
M.Rng = Rng

-- Rng(seed): seed an integer (the same seed, the same stream)
function M.new(seed)
  if seed ~= nil and (type(seed) ~= "number" or seed % 1 ~= 0) then
    error("rng: seed must be an integer, got " .. tostring(seed), 2)
  end
  local s = (seed or 12345) % 2147483647
  local self = setmetatable({}, Rng)
  -- spread the seed over both components (none may be all zero)
  self.s10, self.s11, self.s12 = 12345 + s, 54321 + (s * 7) % 1000003, 99991 + s % 65536
  self.s20, self.s21, self.s22 = 24680 + (s * 13) % 999983, 13579 + s, 11111 + (s * 3) % 77777
  for _ = 1, 10 do self:random() end
  return self
end

function Rng:random()
  local p1 = (A12 * self.s11 - A13 * self.s10) % M1
  self.s10, self.s11, self.s12 = self.s11, self.s12, p1
  local p2 = (A21 * self.s22 - A23 * self.s20) % M2
  self.s20, self.s21, self.s22 = self.s21, self.s22, p2
  local z = (p1 - p2) % M1
  return (z + 0.5) * NORM
end

function Rng:uniform(a, b) return a + (b - a) * self:random() end
function Rng:randint(a, b) return a + floor(self:random() * (b - a + 1)) end
function Rng:bernoulli(p) return self:random() < p end

-- a standard normal draw (Box-Muller, one of the pair)
function Rng:normal()
  return math.sqrt(-2 * math.log(self:random())) * math.cos(2 * math.pi * self:random())
end

-- a Gamma(k, 1) draw (Marsaglia and Tsang; k < 1 through k + 1's draw times u^(1/k))
function Rng:gamma(k)
  if type(k) ~= "number" or k ~= k or k <= 0 then
    error("rng: gamma's shape must be a positive number, got " .. tostring(k), 2)
  end
  if k < 1 then return self:gamma(k + 1) * self:random() ^ (1 / k) end
  local d = k - 1 / 3
  local c = 1 / math.sqrt(9 * d)
  while true do
    local x, v
    repeat
      x = self:normal()
      v = 1 + c * x
    until v > 0
    v = v * v * v
    local u = self:random()
    if math.log(u) < 0.5 * x * x + d - d * v + d * math.log(v) then return d * v end
  end
end

-- a Beta(a, b) draw in (0, 1): what GluonCV's YOLOv3 training gives mixup (np.random.beta)
function Rng:beta(a, b)
  if type(a) ~= "number" or type(b) ~= "number" or not (a > 0 and b > 0) then
    error(string.format("rng: beta's a and b must be positive numbers, got %s, %s",
      tostring(a), tostring(b)), 2)
  end
  local x = self:gamma(a)
  return x / (x + self:gamma(b))
end

local default = M.new(0)
-- the rng the transforms use when given none; seed(n) restarts it
function M.default() return default end
function M.seed(n) default = M.new(n) end

-- Replay(draws): draws a list of {kind, value, args...} (kind 0 uniform, 1 randint,
-- 2 bernoulli), as tools/fixtures/make_gluoncv_train_presets_fixture.py records them
local Replay = {}
Replay.__index = Replay
function M.Replay(draws) return setmetatable({ draws = draws, pos = 0 }, Replay) end

local NAMES = { [0] = "uniform", "randint", "bernoulli" }
local function next_draw(self, kind, a, b)
  self.pos = self.pos + 1
  local d = self.draws[self.pos]
  if not d then error(string.format("rng replay: draw %d (%s) is past the record", self.pos,
    NAMES[kind]), 3) end
  local same = d[1] == kind and math.abs(d[3] - a) <= 1e-6 * math.max(1, math.abs(a))
    and (b == nil or math.abs(d[4] - b) <= 1e-6 * math.max(1, math.abs(b)))
  if not same then
    error(string.format("rng replay: draw %d is %s(%s, %s), the record has %s(%s, %s)",
      self.pos, NAMES[kind], tostring(a), tostring(b), NAMES[d[1]], tostring(d[3]),
      tostring(d[4])), 3)
  end
  return d[2]
end
function Replay:uniform(a, b) return next_draw(self, 0, a, b) end
function Replay:randint(a, b) return next_draw(self, 1, a, b) end
function Replay:bernoulli(p) return next_draw(self, 2, p) == 1 end
-- done(): true when every recorded draw was taken
function Replay:done() return self.pos == #self.draws end

return M
