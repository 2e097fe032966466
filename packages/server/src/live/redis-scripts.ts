import type { Redis } from 'ioredis';

/**
 * Adds a batch unless an entry with its token is among the stream's newest entries: the retry
 * of a write that may already have reached Redis (a timeout, a connection lost after sending)
 * so that it is never added twice. Returns the entry's id, new or found.
 * KEYS[1] stream; ARGV: maxlen, ttl seconds, entries to look back, token, then field/value pairs.
 */
const ADD_ONCE = `
local recent = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', ARGV[3])
for _, entry in ipairs(recent) do
  local fields = entry[2]
  if fields[1] == 't' and fields[2] == ARGV[4] then return entry[1] end
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[1], '*', 't', ARGV[4], unpack(ARGV, 5))
redis.call('EXPIRE', KEYS[1], ARGV[2])
return id
`;

/**
 * Puts the runs rebuilt from the store in front of what the stream holds now, once per epoch of
 * the Redis data (the marker key says which epoch the stream was rebuilt for: two instances
 * rebuilding at once do it once). Entries keep their ids; the rebuilt ones get ids just below the
 * oldest entry and the epoch, so a replay reads them first and ids still increase. Only as many
 * as fit in the buffer, newest kept. Atomic, so no entry added meanwhile is lost.
 * KEYS[1] stream, KEYS[2] marker; ARGV: epoch, buffer size, ttl seconds, then the runs' JSON,
 * oldest first. Returns how many runs were added.
 */
const REBUILD = `
if redis.call('GET', KEYS[2]) == ARGV[1] then return 0 end
local size = tonumber(ARGV[2])
local existing = redis.call('XRANGE', KEYS[1], '-', '+')
local runs = #ARGV - 3
local room = math.min(size - #existing, runs)
if room > 0 then
  local below = tonumber(ARGV[1])
  if #existing > 0 then
    local oldest = tonumber(string.match(existing[1][1], '^(%d+)-'))
    if oldest < below then below = oldest end
  end
  local ms = string.format('%.0f', below - 1)
  redis.call('DEL', KEYS[1])
  for i = 1, room do
    redis.call('XADD', KEYS[1], ms .. '-' .. i, 'd', ARGV[3 + runs - room + i])
  end
  for _, entry in ipairs(existing) do
    redis.call('XADD', KEYS[1], entry[1], unpack(entry[2]))
  end
  redis.call('EXPIRE', KEYS[1], ARGV[3])
else
  room = 0
end
redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[3])
return room
`;

/** The bus's scripts, as commands of one connection (EVALSHA, with EVAL when not cached). */
export interface LiveScripts {
  addOnce(
    stream: string,
    maxLen: number,
    ttlSeconds: number,
    lookBack: number,
    token: string,
    fields: string[],
  ): Promise<string>;
  rebuild(
    stream: string,
    marker: string,
    epoch: string,
    bufferSize: number,
    ttlSeconds: number,
    runs: string[],
  ): Promise<number>;
}

type ScriptCommands = {
  flightlogAddOnce(...args: (string | number)[]): Promise<string>;
  flightlogRebuild(...args: (string | number)[]): Promise<number>;
};

export function defineLiveScripts(redis: Redis): LiveScripts {
  redis.defineCommand('flightlogAddOnce', { numberOfKeys: 1, lua: ADD_ONCE });
  redis.defineCommand('flightlogRebuild', { numberOfKeys: 2, lua: REBUILD });
  const commands = redis as unknown as ScriptCommands;
  return {
    addOnce: (stream, maxLen, ttl, lookBack, token, fields) =>
      commands.flightlogAddOnce(stream, maxLen, ttl, lookBack, token, ...fields),
    rebuild: (stream, marker, epoch, bufferSize, ttl, runs) =>
      commands.flightlogRebuild(stream, marker, epoch, bufferSize, ttl, ...runs),
  };
}
