import type { Redis } from 'ioredis';

/**
 * The accounting every script that adds or removes batches shares. Each batch in an agent's
 * stream has a twin in the agent's token stream, under the same id, holding its write's token
 * (`t`) and its size in bytes (`b`): the small index by which batches are counted, trimmed and
 * looked up without reading them. Per prefix, `#bytes` (sorted set: agent → bytes held),
 * `#total` (bytes held by all agents) and `#seen` (sorted set: agent → last write, ms) bound the
 * bus in bytes per agent and in total, the way the in-process bus bounds its memory. Scripts
 * name the keys of other agents from the prefix (ARGV[1]): the bus runs on one Redis, not a
 * cluster.
 */
const ACCOUNTING = `
local prefix = ARGV[1]
local bytesKey = prefix .. '#bytes'
local seenKey = prefix .. '#seen'
local totalKey = prefix .. '#total'
local function streamOf(agent) return prefix .. agent end
local function tokensOf(agent) return prefix .. '#tokens:' .. agent end
local function markerOf(agent) return prefix .. '#rebuilt:' .. agent end

local function heldBy(agent)
  return tonumber(redis.call('ZSCORE', bytesKey, agent) or '0')
end

local function account(agent, delta)
  if delta == 0 then return end
  local left = tonumber(redis.call('ZINCRBY', bytesKey, delta, agent))
  if left <= 0 then redis.call('ZREM', bytesKey, agent) end
  redis.call('INCRBY', totalKey, delta)
end

local function forget(agent)
  local held = heldBy(agent)
  redis.call('DEL', streamOf(agent), tokensOf(agent), markerOf(agent))
  redis.call('ZREM', bytesKey, agent)
  redis.call('ZREM', seenKey, agent)
  if held ~= 0 then redis.call('DECRBY', totalKey, held) end
end

local function sizeOf(twin)
  for i = 1, #twin[2], 2 do
    if twin[2][i] == 'b' then return tonumber(twin[2][i + 1]) end
  end
  return 0
end

-- The agent's oldest batch goes; false when it has none counted.
local function dropOldest(agent)
  local oldest = redis.call('XRANGE', tokensOf(agent), '-', '+', 'COUNT', 1)[1]
  if oldest == nil then return false end
  redis.call('XDEL', tokensOf(agent), oldest[1])
  redis.call('XDEL', streamOf(agent), oldest[1])
  account(agent, -sizeOf(oldest))
  return true
end

-- Within its count and its bytes; its newest batch is always kept.
local function trimAgent(agent, maxLen, maxBytes)
  local length = redis.call('XLEN', tokensOf(agent))
  while length > 1 and (length > maxLen or heldBy(agent) > maxBytes) do
    dropOldest(agent)
    length = length - 1
  end
end

local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Within the total: the agent holding the most gives up its oldest batch first, so one agent
-- flooding costs its own replay, not the others'. An agent whose streams expired (no write for
-- a TTL) is forgotten, one per call, so its count does not linger.
local function trimTotal(maxTotal, now, ttlMs)
  local stale = redis.call('ZRANGE', seenKey, 0, 0, 'WITHSCORES')
  if #stale > 0 and tonumber(stale[2]) < now - ttlMs then forget(stale[1]) end
  while tonumber(redis.call('GET', totalKey) or '0') > maxTotal do
    local top = redis.call('ZREVRANGE', bytesKey, 0, 0)[1]
    if top == nil then
      redis.call('SET', totalKey, 0)
      break
    end
    if redis.call('XLEN', tokensOf(top)) <= 1 or not dropOldest(top) then forget(top) end
  end
end
`;

/**
 * Adds a batch to its agent's stream and its twin to the token stream, then keeps the agent and
 * the bus within their bounds. A retry of a write that may already have reached Redis (a
 * timeout, a connection lost after sending) first looks among the newest tokens, not among
 * batches that may be megabytes each, and never adds one twice. Returns the entry's id, new or
 * found. KEYS[1] stream, KEYS[2] token stream; ARGV: prefix, agent, max batches, ttl seconds,
 * tokens to look back (0: a first write), token, max bytes per agent, max bytes in all, then the
 * batch's field/value pairs.
 */
const WRITE = `${ACCOUNTING}
local agent = ARGV[2]
if ARGV[5] ~= '0' then
  local recent = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', ARGV[5])
  for _, entry in ipairs(recent) do
    if entry[2][2] == ARGV[6] then return entry[1] end
  end
end
-- the streams expired since the agent's last write: what they counted is gone with them
if redis.call('EXISTS', KEYS[2]) == 0 and heldBy(agent) ~= 0 then account(agent, -heldBy(agent)) end
local size = 0
for i = 10, #ARGV, 2 do size = size + #ARGV[i] end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[3], '*', unpack(ARGV, 9))
redis.call('XADD', KEYS[2], id, 't', ARGV[6], 'b', size)
account(agent, size)
trimAgent(agent, tonumber(ARGV[3]), tonumber(ARGV[7]))
local now = nowMs()
redis.call('ZADD', seenKey, now, agent)
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[4])
trimTotal(tonumber(ARGV[8]), now, tonumber(ARGV[4]) * 1000)
return id
`;

/**
 * One page of a stream: entries from ARGV[1] (an id, `(id` for after it, or `-`), at most
 * ARGV[2] of them and about ARGV[3] bytes (at least one entry, whatever its size), so no reply
 * holds the shared connection for long however big an agent's batches are. Returns the entries
 * and 1 when no entry follows them.
 */
const READ = `
local entries = {}
local bytes = 0
local from = ARGV[1]
local count = tonumber(ARGV[2])
local budget = tonumber(ARGV[3])
while #entries < count do
  local entry = redis.call('XRANGE', KEYS[1], from, '+', 'COUNT', 1)[1]
  if entry == nil then return { entries, 1 } end
  local size = 0
  for i = 2, #entry[2], 2 do size = size + #entry[2][i] end
  if #entries > 0 and bytes + size > budget then return { entries, 0 } end
  entries[#entries + 1] = entry
  bytes = bytes + size
  from = '(' .. entry[1]
end
return { entries, 0 }
`;

/**
 * Puts the runs rebuilt from the store in front of what the stream holds now, once per epoch of
 * the Redis data (the marker key says which epoch the stream was rebuilt for: two instances
 * rebuilding at once do it once). Entries keep their ids; the rebuilt ones get ids just below the
 * oldest entry and the epoch, so a replay reads them first and ids still increase. Only as many
 * as fit in the buffer, newest kept, and within the agent's bytes. Atomic, so no entry added
 * meanwhile is lost. KEYS[1] stream, KEYS[2] marker, KEYS[3] token stream; ARGV: prefix, agent,
 * epoch, buffer size, ttl seconds, max bytes per agent, max bytes in all, then the runs' JSON,
 * oldest first. Returns how many runs were added.
 */
const REBUILD = `${ACCOUNTING}
local agent = ARGV[2]
if redis.call('GET', KEYS[2]) == ARGV[3] then return 0 end
local size = tonumber(ARGV[4])
local existing = redis.call('XRANGE', KEYS[1], '-', '+')
local twins = redis.call('XRANGE', KEYS[3], '-', '+')
local runs = #ARGV - 7
local room = math.min(size - #existing, runs)
if room > 0 then
  local below = tonumber(ARGV[3])
  if #existing > 0 then
    local oldest = tonumber(string.match(existing[1][1], '^(%d+)-'))
    if oldest < below then below = oldest end
  end
  local ms = string.format('%.0f', below - 1)
  redis.call('DEL', KEYS[1], KEYS[3])
  local added = 0
  for i = 1, room do
    local run = ARGV[7 + runs - room + i]
    local id = ms .. '-' .. i
    redis.call('XADD', KEYS[1], id, 'd', run)
    redis.call('XADD', KEYS[3], id, 't', '', 'b', #run)
    added = added + #run
  end
  for _, entry in ipairs(existing) do
    redis.call('XADD', KEYS[1], entry[1], unpack(entry[2]))
  end
  for _, twin in ipairs(twins) do
    redis.call('XADD', KEYS[3], twin[1], unpack(twin[2]))
  end
  account(agent, added)
  trimAgent(agent, size, tonumber(ARGV[6]))
  local now = nowMs()
  redis.call('ZADD', seenKey, now, agent)
  redis.call('EXPIRE', KEYS[1], ARGV[5])
  redis.call('EXPIRE', KEYS[3], ARGV[5])
  trimTotal(tonumber(ARGV[7]), now, tonumber(ARGV[5]) * 1000)
else
  room = 0
end
redis.call('SET', KEYS[2], ARGV[3], 'EX', ARGV[5])
return room
`;

/** Drops an agent's streams and what they counted. ARGV: prefix, agent. */
const FORGET = `${ACCOUNTING}
forget(ARGV[2])
return 1
`;

/**
 * Removes items of deleted traces from an agent's stream, keeping every other entry and item with
 * its id: a stream entry cannot be changed in place, so when any entry changes the stream and its
 * token stream are rewritten whole, as REBUILD does, in one atomic step (at most the agent's
 * bounded buffer). A removed item becomes an `x` field, so the items after it keep their ids; an
 * entry left with no item goes, with its twin; the bytes counted follow. Entries named but gone
 * (trimmed meanwhile) are skipped. KEYS[1] stream, KEYS[2] token stream; ARGV: prefix, agent, then
 * pairs of an entry id and its item indexes to remove, as `,0,2,`. Returns the entries changed.
 */
const FORGET_ITEMS = `${ACCOUNTING}
local agent = ARGV[2]
local drops = {}
for i = 3, #ARGV - 1, 2 do drops[ARGV[i]] = ARGV[i + 1] end
local entries = redis.call('XRANGE', KEYS[1], '-', '+')
local twins = redis.call('XRANGE', KEYS[2], '-', '+')
local changed = 0
for _, entry in ipairs(entries) do
  if drops[entry[1]] then changed = changed + 1 end
end
if changed == 0 then return 0 end
local ttl = redis.call('PTTL', KEYS[1])
local twinOf = {}
for _, twin in ipairs(twins) do twinOf[twin[1]] = twin[2] end
redis.call('DEL', KEYS[1], KEYS[2])
local delta = 0
for _, entry in ipairs(entries) do
  local id, fields = entry[1], entry[2]
  local drop = drops[id]
  local twin = twinOf[id]
  local kept = fields
  local size = nil
  if drop then
    kept = {}
    size = 0
    local item = 0
    local shown = false
    for i = 1, #fields, 2 do
      local field, value = fields[i], fields[i + 1]
      if field == 'd' or field == 'r' or field == 'x' then
        if field == 'd' and string.find(drop, ',' .. item .. ',', 1, true) then
          field, value = 'x', ''
        end
        if field ~= 'x' then shown = true end
        item = item + 1
      end
      kept[#kept + 1] = field
      kept[#kept + 1] = value
      if field == 'd' or field == 'r' then size = size + #value end
    end
    if not shown then kept = nil end
  end
  if kept then
    redis.call('XADD', KEYS[1], id, unpack(kept))
    if twin then
      if size then
        local rewritten = {}
        for i = 1, #twin, 2 do
          local field, value = twin[i], twin[i + 1]
          if field == 'b' then
            delta = delta + size - tonumber(value)
            value = size
          end
          rewritten[#rewritten + 1] = field
          rewritten[#rewritten + 1] = value
        end
        twin = rewritten
      end
      redis.call('XADD', KEYS[2], id, unpack(twin))
    end
  elseif twin then
    delta = delta - sizeOf({ id, twin })
  end
end
account(agent, delta)
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return changed
`;

/** An answer of Redis itself (the command ran and failed), not a lost connection or timeout. */
export const isReplyError = (error: unknown): boolean =>
  error instanceof Error && error.name === 'ReplyError';

/** An entry of an agent's stream, as Redis answers it. */
export type Entry = [id: string, fields: string[]];

/** The bounds the scripts keep the bus within. */
export interface BusBounds {
  /** Batches per agent. */
  maxBatches: number;
  /** Bytes of batches per agent (its newest batch is kept whatever its size). */
  agentMaxBytes: number;
  /** Bytes of batches across all agents. */
  totalMaxBytes: number;
  ttlSeconds: number;
}

/** The bus's scripts, as commands of one connection (EVALSHA, with EVAL when not cached). */
export interface LiveScripts {
  write(agentId: string, lookBack: number, token: string, fields: string[]): Promise<string>;
  read(
    agentId: string,
    from: string,
    maxEntries: number,
    maxBytes: number,
  ): Promise<{ entries: Entry[]; complete: boolean }>;
  rebuild(agentId: string, epoch: string, runs: string[]): Promise<number>;
  forget(agentId: string): Promise<void>;
  /** See FORGET_ITEMS: `drops` alternates entry ids and their item indexes (`,0,2,`). */
  forgetItems(agentId: string, drops: string[]): Promise<number>;
}

type ScriptCommands = {
  flightlogWrite(...args: (string | number)[]): Promise<string>;
  flightlogRead(...args: (string | number)[]): Promise<[Entry[], number]>;
  flightlogRebuild(...args: (string | number)[]): Promise<number>;
  flightlogForget(...args: (string | number)[]): Promise<number>;
  flightlogForgetItems(...args: (string | number)[]): Promise<number>;
};

export function defineLiveScripts(redis: Redis, prefix: string, bounds: BusBounds): LiveScripts {
  redis.defineCommand('flightlogWrite', { numberOfKeys: 2, lua: WRITE });
  redis.defineCommand('flightlogRead', { numberOfKeys: 1, lua: READ });
  redis.defineCommand('flightlogRebuild', { numberOfKeys: 3, lua: REBUILD });
  redis.defineCommand('flightlogForget', { numberOfKeys: 0, lua: FORGET });
  redis.defineCommand('flightlogForgetItems', { numberOfKeys: 2, lua: FORGET_ITEMS });
  const commands = redis as unknown as ScriptCommands;
  const { maxBatches, agentMaxBytes, totalMaxBytes, ttlSeconds } = bounds;
  const stream = (agentId: string) => `${prefix}${agentId}`;
  const tokens = (agentId: string) => `${prefix}#tokens:${agentId}`;
  return {
    write: (agentId, lookBack, token, fields) =>
      commands.flightlogWrite(
        stream(agentId),
        tokens(agentId),
        prefix,
        agentId,
        maxBatches,
        ttlSeconds,
        lookBack,
        token,
        agentMaxBytes,
        totalMaxBytes,
        ...fields,
      ),
    read: async (agentId, from, maxEntries, maxBytes) => {
      const [entries, complete] = await commands.flightlogRead(
        stream(agentId),
        from,
        maxEntries,
        maxBytes,
      );
      return { entries, complete: complete === 1 };
    },
    rebuild: (agentId, epoch, runs) =>
      commands.flightlogRebuild(
        stream(agentId),
        `${prefix}#rebuilt:${agentId}`,
        tokens(agentId),
        prefix,
        agentId,
        epoch,
        maxBatches,
        ttlSeconds,
        agentMaxBytes,
        totalMaxBytes,
        ...runs,
      ),
    forget: async (agentId) => {
      await commands.flightlogForget(prefix, agentId);
    },
    forgetItems: (agentId, drops) =>
      commands.flightlogForgetItems(stream(agentId), tokens(agentId), prefix, agentId, ...drops),
  };
}
