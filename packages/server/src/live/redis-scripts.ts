import type { Redis } from 'ioredis';

/**
 * Adds a batch to its agent's stream, and its token, under the same id, to the agent's token
 * stream: a small stream of the tokens of the newest writes, so that the retry of a write that
 * may already have reached Redis (a timeout, a connection lost after sending) looks among
 * tokens, not among batches that may be megabytes each, and never adds one twice. Returns the
 * entry's id, new or found. KEYS[1] stream, KEYS[2] token stream; ARGV: maxlen, ttl seconds,
 * tokens to look back (0: a first write, no look), token, then field/value pairs.
 */
const WRITE = `
if ARGV[3] ~= '0' then
  local recent = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', ARGV[3])
  for _, entry in ipairs(recent) do
    if entry[2][2] == ARGV[4] then return entry[1] end
  end
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[1], '*', unpack(ARGV, 5))
redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[1], id, 't', ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[2])
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
  write(
    stream: string,
    tokens: string,
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
  flightlogWrite(...args: (string | number)[]): Promise<string>;
  flightlogRebuild(...args: (string | number)[]): Promise<number>;
};

export function defineLiveScripts(redis: Redis): LiveScripts {
  redis.defineCommand('flightlogWrite', { numberOfKeys: 2, lua: WRITE });
  redis.defineCommand('flightlogRebuild', { numberOfKeys: 2, lua: REBUILD });
  const commands = redis as unknown as ScriptCommands;
  return {
    write: (stream, tokens, maxLen, ttl, lookBack, token, fields) =>
      commands.flightlogWrite(stream, tokens, maxLen, ttl, lookBack, token, ...fields),
    rebuild: (stream, marker, epoch, bufferSize, ttl, runs) =>
      commands.flightlogRebuild(stream, marker, epoch, bufferSize, ttl, ...runs),
  };
}
