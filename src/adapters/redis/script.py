"""The Lua script that runs :func:`domain.state.decide` inside Redis, atomically per batch.

``KEYS[i]`` is the state key of claim ``i`` (a key may repeat: later claims see the effect
of earlier ones). ``ARGV[1]`` is a grace in seconds added to every key's TTL, then one value
per claim (``claim_argument``): ``window,now,time,expires_at,owner``, the owner
percent-encoded (so it holds no comma; ``''`` for none). One argument per claim, not five:
redis-py's packing of the arguments was the largest cost of a batch with Redis state.

Values use the domain's encoding: v3 ``3|time,expires_at,owner;...`` (owners stay
percent-encoded, so they are compared and written back as they are); v2 (the same body) and
v1 ``1|time,expires_at`` are read and upgraded to v3 when the key is next written. A v1 or v2
value under a key holding ``\x1e`` was stored under the legacy spelling of another key
(``domain.state.current_key``): it is taken as no entries, and overwritten. Every key is
read before anything is written, so an unreadable value fails the whole batch with nothing
applied. A written key expires ``max(kept_until) - now (+ grace)`` seconds later. Returns
per claim 1 (emit), or for a duplicate the emission it repeats as the state stores it
(``time,expires_at,owner``, the first live one within the window, as ``decide`` picks it).
"""

import hashlib

BAD_STATE = "DEDUP_BAD_STATE"

CHECK_AND_SET = r"""
local function parse(value, key)
  local entries = {}
  if not value then return entries end
  local version, body = string.match(value, '^(%d+)|(.*)$')
  -- domain.state.current_key: before v3 a key holding the escape character \x1e was another key's
  if (version == '1' or version == '2') and string.find(key, '\30', 1, true) then return entries end
  if version == '3' or version == '2' then
    for part in string.gmatch(body, '[^;]+') do
      local t, e, owner = string.match(part, '^(%-?%d+),(%-?%d+),([^,]*)$')
      if not t then return nil end
      entries[#entries + 1] = {tonumber(t), tonumber(e), owner, part}
    end
  elseif version == '1' then
    local t, e = string.match(body, '^(%-?%d+),(%-?%d+)$')
    if not t then return nil end
    entries[1] = {tonumber(t), tonumber(e), '', t .. ',' .. e .. ','}
  else
    return nil
  end
  return entries
end

-- domain.state.decide, line for line: e = {time, expires_at, owner, text}; kept_until = 2 * expires_at - time
-- (the claim: its time, window, expiry, now, owner, and its entry's text as stored)
local function decide(entries, time, window, expires, now, owner, text)
  local claimed = {time, expires, owner, text}
  if #entries == 0 then return 1, {claimed}, true end
  local kept = {}
  for _, e in ipairs(entries) do
    if 2 * e[2] - e[1] > now then kept[#kept + 1] = e end
  end
  local changed = #kept ~= #entries
  if owner ~= '' then
    for _, e in ipairs(kept) do
      if e[2] > now and e[3] == owner then return 1, kept, changed end
    end
  end
  for _, e in ipairs(kept) do
    if e[2] > now and math.abs(time - e[1]) < window then return e[4], kept, changed end
  end
  kept[#kept + 1] = claimed
  return 1, kept, true
end

-- entries no longer kept (kept_until <= now) are as good as none
local function store(key, entries, now, grace)
  local last = now
  for _, e in ipairs(entries) do
    local until_ = 2 * e[2] - e[1]
    if until_ > last then last = until_ end
  end
  if last <= now then
    redis.call('DEL', key)
    return
  end
  local value
  if #entries == 1 then
    value = '3|' .. entries[1][4]
  else
    local parts = {}
    for i, e in ipairs(entries) do parts[i] = e[4] end
    value = '3|' .. table.concat(parts, ';')
  end
  redis.call('SET', key, value, 'PX', string.format('%d', (last - now + grace) * 1000))
end

local grace = tonumber(ARGV[1])
local state, dirty = {}, {}
for _, key in ipairs(KEYS) do
  if state[key] == nil then
    local entries = parse(redis.call('GET', key), key)
    if entries == nil then return redis.error_reply('DEDUP_BAD_STATE unreadable state value at ' .. key) end
    state[key] = entries
  end
end
local verdicts = {}
for i, key in ipairs(KEYS) do
  local window, now, text, time, expires, owner =
    string.match(ARGV[i + 1], '^(%-?%d+),(%-?%d+),((%-?%d+),(%-?%d+),([^,]*))$')
  if not window then return redis.error_reply('DEDUP_BAD_CLAIM malformed claim ' .. ARGV[i + 1]) end
  now, time = tonumber(now), tonumber(time)
  local granted, entries, changed = decide(state[key], time, tonumber(window), tonumber(expires), now, owner, text)
  if changed then
    state[key] = entries
    -- without a watermark yet (now = 0, domain.state.NO_WATERMARK) the TTL counts from the claim's time
    dirty[key] = now > 0 and now or time
  end
  verdicts[i] = granted
end
for key, now in pairs(dirty) do
  store(key, state[key], now, grace)
end
return verdicts
"""

SCRIPT_SHA = hashlib.sha1(CHECK_AND_SET.encode()).hexdigest()


def claim_argument(time: int, window: int, expires_at: int, now: int, quoted_owner: str) -> str:
    """A claim as the script reads it from its ``ARGV``: ``window,now,time,expires_at,owner``
    (the tail is the claim's entry as the value stores it)."""
    return f"{window},{now},{time},{expires_at},{quoted_owner}"
