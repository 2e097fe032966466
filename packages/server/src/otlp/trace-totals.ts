import { storableText } from '@flightlog/protocol';

/**
 * A trace's totals carried forward from its stored snapshot by the events an export adds, by
 * the rules the client library follows for its batches (packages/client trace-aggregates.ts):
 * `totalTokens` sums `llm_call` usage.totalTokens (capped at 2^53 − 1), `totalCostUsd` sums
 * `llm_call` costUsd exactly (each cost read by its shortest decimal text, rounded to 12 places;
 * the sum in whole units, never in floating point), `toolsCalled` gathers `tool_call` names once
 * each (at most 1,024, each cut to 256 characters), and `eventCount` counts every event.
 */

const MAX_TOOLS = 1_024;
const MAX_TOOL_NAME = 256;
/** Decimal places a cost is rounded to (as the client does). */
const COST_PLACES = 12;
/** The wire's decimal strings hold at most 80 characters; a larger total is capped. */
const MAX_DECIMAL_TEXT = 80;

const DECIMAL = /^(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/i;

/** A non-negative decimal (number or text) as whole units of 10^-places, rounded half up. */
function toUnits(value: number | string, places: number): bigint | undefined {
  if (typeof value === 'number' && !(Number.isFinite(value) && value >= 0)) return undefined;
  const match = DECIMAL.exec(String(value));
  if (!match) return undefined;
  const [, whole = '0', fraction = '', exponentText] = match;
  const exponent = exponentText === undefined ? 0 : Number(exponentText);
  if (Math.abs(exponent) > 400) return exponent < 0 ? 0n : undefined;
  const digits = BigInt(whole + fraction);
  const shift = places - fraction.length + exponent;
  if (shift >= 0) return digits * 10n ** BigInt(shift);
  const divisor = 10n ** BigInt(-shift);
  return (digits + divisor / 2n) / divisor;
}

function unitsText(units: bigint, places: number): string {
  const scale = 10n ** BigInt(places);
  const whole = (units / scale).toString();
  const fraction = (units % scale).toString().padStart(places, '0').replace(/0+$/, '');
  const text = fraction === '' ? whole : `${whole}.${fraction}`;
  return text.length <= MAX_DECIMAL_TEXT ? text : '9'.repeat(MAX_DECIMAL_TEXT);
}

/** `stored` (an exact decimal string) plus `costs`, as a decimal string. */
export function addCosts(stored: string, costs: readonly number[]): string {
  if (costs.every((cost) => cost === 0)) return stored;
  // as many places as the stored total has, and at least the 12 new costs are rounded to
  const storedPlaces = stored.split('.')[1]?.length ?? 0;
  const places = Math.max(COST_PLACES, storedPlaces);
  let total = toUnits(stored, places) ?? 0n;
  for (const cost of costs) {
    const units = toUnits(cost, COST_PLACES);
    if (units !== undefined) total += units * 10n ** BigInt(places - COST_PLACES);
  }
  return unitsText(total, places);
}

/** `stored` plus `tokens`, capped where a JSON number stops being exact. */
export function addTokens(stored: number, tokens: readonly number[]): number {
  let total = stored;
  for (const n of tokens) total = Math.min(total + n, Number.MAX_SAFE_INTEGER);
  return total;
}

/** `stored` tool names with `called` added once each, in first-call order, within the caps. */
export function addTools(stored: readonly string[], called: readonly string[]): string[] {
  const tools = [...stored];
  const seen = new Set(tools);
  for (const name of called) {
    if (tools.length >= MAX_TOOLS) break;
    const text = storableText(name, MAX_TOOL_NAME);
    if (seen.has(text)) continue;
    seen.add(text);
    tools.push(text);
  }
  return tools;
}
