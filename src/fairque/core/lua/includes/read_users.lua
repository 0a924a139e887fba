-- read_users(argv, at): parse "A, A users, S, S users" starting at argv[at] into
-- (assigned, steal, any, after) where `any` is true when a steal target is '*' and
-- `after` is the index of the first argument past the two lists.
local function read_users(argv, at)
  local na = argv[at] + 0  -- Lua's string coercion: cheaper than tonumber
  local assigned = {}
  for i = 1, na do assigned[i] = argv[at + i] end
  local ns = argv[at + na + 1] + 0
  local steal, any = {}, false
  for i = 1, ns do
    local u = argv[at + na + 1 + i]
    if u == '*' then any = true else steal[#steal + 1] = u end
  end
  return assigned, steal, any, at + na + ns + 2
end
