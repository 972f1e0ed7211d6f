-- Reserves one call against a contract's counters, all or nothing, and
-- counts it at once: a call is counted as executed from its reservation
-- until a release gives it back.
-- KEYS: 1 the reservation's outcome record, 2 the session's count (hash,
-- field c), 3 the caller's window, 4 the (sender, tool) rate window;
-- windows are hashes of bucket number -> calls.
-- ARGV: 1 session budget (0: none), 2 session TTL ms, 3 caller calls (0:
-- none), 4 caller window ms, 5 rate limit (0: none), 6 rate window ms,
-- 7 outcome record TTL ms, 8 deadline: the server time (microseconds) after
-- which the caller no longer waits for the answer (0: none).
-- Returns "ok" (or "ok:N" when it took a session slot: the call is the
-- session's Nth), "budget", "caller" or "rate" (the limit without room),
-- "late" (run after its deadline: it takes nothing, as its caller denied
-- the call), or the record of an earlier attempt with the same id ("ok",
-- "ok:N", "released", "cancelled") without counting again.
local prev = redis.call('GET', KEYS[1])
if prev then
  return prev
end
local t = redis.call('TIME')
local deadline = tonumber(ARGV[8] or '0')
if deadline > 0 and tonumber(t[1]) * 1000000 + tonumber(t[2]) > deadline then
  return 'late'
end
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local budget = tonumber(ARGV[1])
local sessionTTL = tonumber(ARGV[2])

-- window counts the calls in the 61 buckets (each a sixtieth of span) that
-- intersect the window ending now, dropping older buckets; it returns the
-- count, the current bucket and the key's TTL.
local function window(key, span)
  local tick = math.max(math.floor(span / 60), 1)
  local b = math.floor(now / tick)
  local fields = redis.call('HGETALL', key)
  local sum, old = 0, {}
  for i = 1, #fields, 2 do
    if tonumber(fields[i]) <= b - 61 then
      old[#old + 1] = fields[i]
    else
      sum = sum + tonumber(fields[i + 1])
    end
  end
  if #old > 0 then
    redis.call('HDEL', key, unpack(old))
  end
  return sum, b, tick * 61
end

local outcome = 'ok'
if budget > 0 then
  local used = tonumber(redis.call('HGET', KEYS[2], 'c') or '0')
  -- An attempt keeps the session alive, denied or not.
  redis.call('PEXPIRE', KEYS[2], sessionTTL)
  if used >= budget then
    outcome = 'budget'
  end
end
local callerCalls, callerB, callerTTL = tonumber(ARGV[3]), 0, 0
if outcome == 'ok' and callerCalls > 0 then
  local n
  n, callerB, callerTTL = window(KEYS[3], tonumber(ARGV[4]))
  if n >= callerCalls then
    outcome = 'caller'
  end
end
local rate, rateB, rateTTL = tonumber(ARGV[5]), 0, 0
if outcome == 'ok' and rate > 0 then
  local n
  n, rateB, rateTTL = window(KEYS[4], tonumber(ARGV[6]))
  if n >= rate then
    outcome = 'rate'
  end
end

if outcome ~= 'ok' then
  -- A denial takes nothing, so a retry may decide afresh: no record.
  return outcome
end
if budget > 0 then
  outcome = 'ok:' .. redis.call('HINCRBY', KEYS[2], 'c', 1)
  redis.call('PEXPIRE', KEYS[2], sessionTTL)
end
if callerCalls > 0 then
  redis.call('HINCRBY', KEYS[3], callerB, 1)
  redis.call('PEXPIRE', KEYS[3], callerTTL)
end
if rate > 0 then
  redis.call('HINCRBY', KEYS[4], rateB, 1)
  redis.call('PEXPIRE', KEYS[4], rateTTL)
end
redis.call('SET', KEYS[1], outcome, 'PX', tonumber(ARGV[7]))
return outcome
