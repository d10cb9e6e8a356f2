-- mx.gluoncv.model_zoo.rcnn_sort — the order MXNet 1.9's CPU argsort gives. Its TopKSort
-- sorts the positions 0..n-1 with std::sort (libstdc++'s introsort: median-of-three
-- partitions down to 16 elements, a heap sort past 2 * log2(n) levels, then insertion
-- sort), which is not stable: equal keys come out in an order of its own. GluonCV's
-- samplers pick their positive and negative samples from runs of equal keys, so the
-- samples equal GluonCV's only when ties come out as MXNet's do.
--
--   local argsort = require("mx.gluoncv.model_zoo.rcnn_sort").argsort
--   local order = argsort({2, 0, 3, 2}, true)   -- 1-based positions, descending: {3, 4, 1, 2}
local floor = math.floor

local M = {}

local THRESHOLD = 16

-- a[lo..hi) is the range; comp(x, y) compares two elements (positions into the keys)
-- libstdc++'s __unguarded_linear_insert: v (from a[i]) moved left past the larger ones; a
-- smaller element stands somewhere before it
local function linear_insert(a, i, v, comp)
  local last, nxt = i, i - 1
  while comp(v, a[nxt]) do
    a[last] = a[nxt]
    last, nxt = nxt, nxt - 1
  end
  a[last] = v
end

local function insertion(a, lo, hi, comp)
  if lo == hi then return end
  for i = lo + 1, hi - 1 do
    local v = a[i]
    if comp(v, a[lo]) then
      for k = i, lo + 1, -1 do a[k] = a[k - 1] end
      a[lo] = v
    else
      linear_insert(a, i, v, comp)
    end
  end
end

local function unguarded_insertion(a, lo, hi, comp)
  for i = lo, hi - 1 do linear_insert(a, i, a[i], comp) end
end

-- the heap of a[first .. first + len), 0-based hole positions as libstdc++'s
local function adjust_heap(a, first, hole, len, value, comp)
  local top, second = hole, hole
  while second < floor((len - 1) / 2) do
    second = 2 * (second + 1)
    if comp(a[first + second], a[first + second - 1]) then second = second - 1 end
    a[first + hole] = a[first + second]
    hole = second
  end
  if len % 2 == 0 and second == floor((len - 2) / 2) then
    second = 2 * (second + 1)
    a[first + hole] = a[first + second - 1]
    hole = second - 1
  end
  local parent = floor((hole - 1) / 2)
  while hole > top and comp(a[first + parent], value) do
    a[first + hole] = a[first + parent]
    hole = parent
    parent = floor((hole - 1) / 2)
  end
  a[first + hole] = value
end

local function heap_sort(a, lo, hi, comp)
  local len = hi - lo
  if len >= 2 then
    local parent = floor((len - 2) / 2)
    while true do
      adjust_heap(a, lo, parent, len, a[lo + parent], comp)
      if parent == 0 then break end
      parent = parent - 1
    end
  end
  local last = hi
  while last - lo > 1 do
    last = last - 1
    local v = a[last]
    a[last] = a[lo]
    adjust_heap(a, lo, 0, last - lo, v, comp)
  end
end

local function median_to_first(a, result, x, y, z, comp)
  local ax, ay, az = a[x], a[y], a[z]
  local pick
  if comp(ax, ay) then
    if comp(ay, az) then pick = y elseif comp(ax, az) then pick = z else pick = x end
  elseif comp(ax, az) then pick = x
  elseif comp(ay, az) then pick = z
  else pick = y end
  a[result], a[pick] = a[pick], a[result]
end

local function partition(a, first, last, pivot, comp)
  while true do
    while comp(a[first], a[pivot]) do first = first + 1 end
    last = last - 1
    while comp(a[pivot], a[last]) do last = last - 1 end
    if first >= last then return first end
    a[first], a[last] = a[last], a[first]
    first = first + 1
  end
end

local function introsort(a, lo, hi, depth, comp)
  while hi - lo > THRESHOLD do
    if depth == 0 then
      heap_sort(a, lo, hi, comp)
      return
    end
    depth = depth - 1
    local mid = lo + floor((hi - lo) / 2)
    median_to_first(a, lo, lo + 1, mid, hi - 1, comp)
    local cut = partition(a, lo + 1, hi, lo, comp)
    introsort(a, cut, hi, depth, comp)
    hi = cut
  end
end

local function lg(n)
  local k = 0
  while n > 1 do
    n = floor(n / 2)
    k = k + 1
  end
  return k
end

-- std_sort(a, comp): a (a Lua list) sorted in place as libstdc++'s std::sort(first, last,
-- comp) orders it; returns a
function M.std_sort(a, comp)
  local n = #a
  if n < 2 then return a end
  introsort(a, 1, n + 1, 2 * lg(n), comp)
  if n > THRESHOLD then
    insertion(a, 1, THRESHOLD + 1, comp)
    unguarded_insertion(a, THRESHOLD + 1, n + 1, comp)
  else
    insertion(a, 1, n + 1, comp)
  end
  return a
end

-- argsort(keys, descending): the 1-based positions of the Lua list keys in the order MXNet
-- 1.9's CPU argsort gives them (ascending unless descending)
function M.argsort(keys, descending)
  local idx = {}
  for i = 1, #keys do idx[i] = i end
  if descending then
    return M.std_sort(idx, function(i, j) return keys[i] > keys[j] end)
  end
  return M.std_sort(idx, function(i, j) return keys[i] < keys[j] end)
end

return M
