"""The Lua script that runs :func:`domain.state.decide` inside Redis, atomically per batch.

``KEYS[i]`` is the state key of claim ``i`` (a key may repeat: later claims see the effect
of earlier ones). ``ARGV[1]`` is a grace in seconds added to every key's TTL, then one value
per claim (``claim_argument``): ``time,window,expires_at,now,owner``, the owner
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

-- domain.state.decide, line for line: e = {time, expires_at, owner, text}
local function kept_until(e) return 2 * e[2] - e[1] end

local function decide(entries, c)
  local kept = {}
  for _, e in ipairs(entries) do
    if kept_until(e) > c.now then kept[#kept + 1] = e end
  end
  local changed = #kept ~= #entries
  for _, e in ipairs(kept) do
    if e[2] > c.now and c.owner ~= '' and e[3] == c.owner then return 1, kept, changed end
  end
  for _, e in ipairs(kept) do
    if e[2] > c.now and math.abs(c.time - e[1]) < c.window then return e[4], kept, changed end
  end
  kept[#kept + 1] = {c.time, c.expires, c.owner, c.time_text .. ',' .. c.expires_text .. ',' .. c.owner}
  return 1, kept, true
end

-- entries no longer kept (kept_until <= now) are as good as none
local function store(key, entries, now, grace)
  local parts, last = {}, now
  for i, e in ipairs(entries) do
    parts[i] = e[4]
    if kept_until(e) > last then last = kept_until(e) end
  end
  if last <= now then
    redis.call('DEL', key)
  else
    redis.call('SET', key, '3|' .. table.concat(parts, ';'), 'PX', string.format('%d', (last - now + grace) * 1000))
  end
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
  local time_text, window, expires_text, now, owner =
    string.match(ARGV[i + 1], '^(%-?%d+),(%-?%d+),(%-?%d+),(%-?%d+),([^,]*)$')
  if not time_text then return redis.error_reply('DEDUP_BAD_CLAIM malformed claim ' .. ARGV[i + 1]) end
  local c = {time_text = time_text, window = tonumber(window), expires_text = expires_text,
             now = tonumber(now), owner = owner}
  c.time, c.expires = tonumber(c.time_text), tonumber(c.expires_text)
  local granted, entries, changed = decide(state[key], c)
  if changed then
    state[key] = entries
    -- without a watermark yet (now = 0, domain.state.NO_WATERMARK) the TTL counts from the claim's time
    dirty[key] = c.now > 0 and c.now or c.time
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
    """A claim as the script reads it from its ``ARGV``: ``time,window,expires_at,now,owner``."""
    return f"{time},{window},{expires_at},{now},{quoted_owner}"
