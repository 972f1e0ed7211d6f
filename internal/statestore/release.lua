-- Releases one reservation whose call did not execute: gives its slot of
-- the session budget back, once. Windows keep the attempt, as the
-- in-process limiter's do.
-- A reservation not (yet) recorded is recorded as cancelled, so one that
-- reaches the server after its caller gave up on it takes nothing.
-- KEYS: 1 the session's count, 2 the reservation's outcome record.
-- ARGV: 1 outcome record TTL ms.
local prev = redis.call('GET', KEYS[2])
if not prev then
  redis.call('SET', KEYS[2], 'cancelled', 'PX', tonumber(ARGV[1]))
  return 0
end
if prev ~= 'ok' and string.sub(prev, 1, 3) ~= 'ok:' then
  return 0
end
redis.call('SET', KEYS[2], 'released', 'KEEPTTL')
if tonumber(redis.call('HGET', KEYS[1], 'c') or '0') > 0 then
  redis.call('HINCRBY', KEYS[1], 'c', -1)
end
return 1
