-- task_stock(prio, max_retries, keep, ttl): whether a task with these values (as the
-- push sends them: text) is the stock task, whose hash leaves the four fields out
-- (``taskhash.STOCK``; most tasks are), so a queued task costs the server fewer bytes.
-- A task that differs in any stores all four. Called without arguments: the four stock
-- values, which a reader takes for a missing field. ('retries' is left out until an
-- attempt fails: a reader takes 0.)
local function task_stock(prio, max_retries, keep, ttl)
  local p, r, k, t = '3', '3', '1', '86400000'
  if prio == nil then return p, r, k, t end
  return prio == p and max_retries == r and keep == k and ttl == t
end
