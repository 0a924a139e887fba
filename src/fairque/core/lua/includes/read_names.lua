-- read_names(argv, at): the task names a worker handles, "N, N names" from argv[at]:
-- a set (name -> true), or false when N is 0 (the worker takes any name); and the index
-- of the first argument past the list.
local function read_names(argv, at)
  local n = argv[at] + 0  -- Lua's string coercion: cheaper than tonumber
  if n == 0 then return false, at + 1 end
  local names = {}
  for i = 1, n do names[argv[at + i]] = true end
  return names, at + n + 1
end
