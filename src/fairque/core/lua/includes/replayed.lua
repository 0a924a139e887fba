-- replayed(op, req): the answer a request already got, or nil. A script that changes a
-- task records '<request id> <answer>' in the task's 'op' field; when a
-- client resends the same request after a lost reply, the script finds its own request
-- id there and returns the same answer without changing anything. Lease tokens serve
-- as request ids for a worker's acknowledgements ('L<token>'), client-made ids for
-- cancel and retry.
local function replayed(op, req)
  if op and string.sub(op, 1, #req + 1) == req .. ' ' then
    return string.sub(op, #req + 2)
  end
  return nil
end
