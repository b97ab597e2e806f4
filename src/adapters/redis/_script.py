"""The Lua scripts that run :func:`domain._state.decide` inside Redis, and forget what expired.

**CHECK_AND_SET** decides a chunk of claims atomically. ``KEYS[i]`` is the state key of claim
``i`` (a key may repeat: later claims see the effect of earlier ones). ``ARGV[1]`` is the
store's key prefix, then one value per claim (``claim_argument``): ``window,now,time,
expires_at,owner``, the owner percent-encoded (so it holds no comma; ``''`` for none). One
argument per claim, not five: redis-py's packing of the arguments was the largest cost of a
batch with Redis state.

Values use the domain's encoding: v3 ``3|time,expires_at,owner;...`` (owners stay
percent-encoded, so they are compared and written back as they are); v2 (the same body) and
v1 ``1|time,expires_at`` are read and upgraded to v3 when the key is next written. A v1 or v2
value under a key holding ``\x1e`` was stored under the legacy spelling of another key
(``domain._state.current_key``): it is taken as no entries, and overwritten. Every key is
read before anything is written, so an unreadable value fails the whole batch with nothing
applied. Each kind of command runs once for the chunk where it can (``MGET`` of its keys, one
``DEL``, one ``MSET``, one ``SADD`` per second filed, one ``ZADD`` per rule): a ``redis.call`` per
key costs more than the command itself. Returns per claim 1 (emit), or for a duplicate the emission it repeats as the state
stores it (``time,expires_at,owner``, the first live one within the window, as ``decide``
picks it).

**Expiry follows event time**, as in the in-memory store: a written key has no TTL; it is
filed in its rule's *expiry index* (:mod:`adapters.redis._expiry`) under the second it may be
forgotten, ``max(kept_until)``, and **SWEEP** deletes it once the rule's *shared watermark*
reaches that second. Instances of a consumer group share the store, each with the watermark
of its own partitions, and one may lag far behind another (a backlog read unevenly): so each
sweep first records, per source partition it claims from (its *lane*), the watermark its
batch began with (``Claim.sweeps_until``) and the time (Redis's clock), and sweeps up to the
lowest watermark among the lanes that claimed within the idle time (``domain._watermarks``: a
partition silent that long holds nothing back). A backlog's keys go as its event time passes
them, however fast it is read, and a key stays while the watermark stands still, however long
the wall clock runs (a stopped job forgets nothing). A key rewritten later is filed again under
its new second; finding it under an old one, the sweep leaves it. (Keys written before this
index carry a wall-clock TTL and expire by it, or are filed when next written.)

SWEEP takes ``ARGV``: the prefix, a budget (at most that many filed keys are looked at), the
idle time in milliseconds, then triples ``rule,lane,watermark`` (the rule's escaped name, a
source partition, and its claims' lowest ``sweeps_until``). It deletes only what the claims'
own ``decide`` would drop (``kept_until <= now``), so its verdicts cannot differ, and
it may run under ``maxmemory`` (flag ``allow-oom``: it only frees), while CHECK_AND_SET is
refused whole when Redis is full (a script with a shebang is checked before it runs): a full
server stops a batch before anything of it is applied. Both need Redis 7.0 or later.
"""

import hashlib

BAD_STATE = "DEDUP_BAD_STATE"

PARSE = r"""
local function parse(value, key)
  local entries = {}
  if not value then return entries end
  local version, body = string.match(value, '^(%d+)|(.*)$')
  -- domain._state.current_key: before v3 a key holding the escape character \x1e was another key's
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


-- the second a value may be forgotten: max(kept_until) over its entries (nil for none)
local function last_kept(entries)
  local last
  for _, e in ipairs(entries) do
    local until_ = 2 * e[2] - e[1]
    if not last or until_ > last then last = until_ end
  end
  return last
end

-- redis.call(command, head..., items...) over a long list in slices (Lua's unpack takes a few thousand
-- values at most): the replies that are lists, joined in order (MGET's values)
local SLICE = 1000 -- even: MSET's and ZADD's items are pairs
local function sliced(command, head, items)
  local replies = {}
  for first = 1, #items, SLICE do
    local args = {}
    for _, h in ipairs(head) do args[#args + 1] = h end
    for i = first, math.min(first + SLICE - 1, #items) do args[#args + 1] = items[i] end
    local reply = redis.call(command, unpack(args))
    if type(reply) == 'table' then
      for _, r in ipairs(reply) do replies[#replies + 1] = r end
    end
  end
  return replies
end

-- adapters.redis._expiry.rule_index: a rule's index (its seconds), under the prefix, '\31expiry\31' and the rule
local function rule_index(prefix, rule)
  return prefix .. '\31expiry\31' .. rule
end
"""

CHECK_AND_SET = (
    "#!lua\n"
    + PARSE
    + r"""
-- domain._state.decide, line for line: e = {time, expires_at, owner, text}; kept_until = 2 * expires_at - time
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

-- the value of kept entries as stored: '3|' and their texts
local function stored(entries)
  if #entries == 1 then return '3|' .. entries[1][4] end
  local parts = {}
  for i, e in ipairs(entries) do parts[i] = e[4] end
  return '3|' .. table.concat(parts, ';')
end

local prefix = ARGV[1]
local state, dirty, read = {}, {}, {}
for _, key in ipairs(KEYS) do
  if not state[key] then state[key] = true; read[#read + 1] = key end
end
local values = sliced('MGET', {}, read) -- one call for the chunk's keys (a call per key costs more than its GET)
for i, key in ipairs(read) do
  local entries = parse(values[i], key)
  if entries == nil then return redis.error_reply('DEDUP_BAD_STATE unreadable state value at ' .. key) end
  state[key] = entries
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
    -- without a watermark yet (now = 0, domain._state.NO_WATERMARK) nothing is forgotten before the claim's time
    dirty[key] = now > 0 and now or time
  end
  verdicts[i] = granted
end
-- entries no longer kept (kept_until <= now) are as good as none: the key is deleted; a kept value is
-- written and filed under its last second; each kind of write in as few calls as it takes
local deleted, written, filed, seconds = {}, {}, {}, {}
for key, now in pairs(dirty) do
  local last = last_kept(state[key])
  if not last or last <= now then
    deleted[#deleted + 1] = key
  else
    written[#written + 1] = key
    written[#written + 1] = stored(state[key])
    local member = string.sub(key, #prefix + 1)
    local index = rule_index(prefix, string.match(member, '^[^\31]*'))
    local second = string.format('%d', last)
    local members = filed[index .. '\31' .. second]
    if not members then
      members = {}
      filed[index .. '\31' .. second] = members
      seconds[index] = seconds[index] or {}
      local scored = seconds[index]
      scored[#scored + 1] = last
      scored[#scored + 1] = second
    end
    members[#members + 1] = member
  end
end
if #deleted > 0 then sliced('DEL', {}, deleted) end
if #written > 0 then sliced('MSET', {}, written) end
for set, members in pairs(filed) do sliced('SADD', {set}, members) end
for index, scored in pairs(seconds) do sliced('ZADD', {index}, scored) end
return verdicts
"""
)

SWEEP = (
    "#!lua flags=allow-oom\n"
    + PARSE
    + r"""
local prefix, budget, idle, removed = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), 0
local clock = redis.call('TIME')
local wall = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local rules, order = {}, {}
for i = 4, #ARGV - 2, 3 do
  redis.call('HSET', rule_index(prefix, ARGV[i]) .. '\31watermarks', ARGV[i + 1], ARGV[i + 2] .. ',' .. wall)
  if not rules[ARGV[i]] then rules[ARGV[i]] = true; order[#order + 1] = ARGV[i] end
end
for _, rule in ipairs(order) do
  -- the rule's watermark over every partition read, by whichever instance, that claimed within the idle time
  local now
  local marks = redis.call('HGETALL', rule_index(prefix, rule) .. '\31watermarks')
  for j = 2, #marks, 2 do
    local mark, at = string.match(marks[j], '^(%-?%d+),(%d+)$')
    if mark and tonumber(at) >= wall - idle and (not now or tonumber(mark) < now) then now = tonumber(mark) end
  end
  local index = rule_index(prefix, rule)
  while now and now > 0 and budget > 0 do
    local due = redis.call('ZRANGEBYSCORE', index, '-inf', now, 'LIMIT', 0, 100)
    if #due == 0 then break end
    local keys, emptied = {}, {}
    for _, second in ipairs(due) do
      if budget <= 0 then break end
      local seconds = index .. '\31' .. second
      local members = redis.call('SPOP', seconds, budget)
      for _, member in ipairs(members) do keys[#keys + 1] = prefix .. member end
      -- fewer than asked: the second's set is empty (and gone)
      if #members < budget or redis.call('EXISTS', seconds) == 0 then emptied[#emptied + 1] = second end
      budget = budget - #members
    end
    local values, gone = sliced('MGET', {}, keys), {}
    for i, key in ipairs(keys) do
      -- an unreadable value is left for the claim that meets it to report
      local entries = values[i] and parse(values[i], key)
      if entries then
        local last = last_kept(entries)
        if not last or last <= now then gone[#gone + 1] = key end
      end
    end
    if #gone > 0 then
      sliced('DEL', {}, gone)
      removed = removed + #gone
    end
    if #emptied > 0 then sliced('ZREM', {index}, emptied) end
  end
end
return removed
"""
)

SCRIPT_SHA = hashlib.sha1(CHECK_AND_SET.encode()).hexdigest()
SWEEP_SHA = hashlib.sha1(SWEEP.encode()).hexdigest()


def claim_argument(time: int, window: int, expires_at: int, now: int, quoted_owner: str) -> str:
    """A claim as the script reads it from its ``ARGV``: ``window,now,time,expires_at,owner``
    (the tail is the claim's entry as the value stores it)."""
    return f"{window},{now},{time},{expires_at},{quoted_owner}"
