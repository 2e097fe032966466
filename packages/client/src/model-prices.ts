/**
 * THE price table of the instrumentations: what one model call costs, in US dollars per million
 * tokens, by model id. It is the only place prices live; `observeOpenAI`, `observeAnthropic` and
 * `flightlogMiddleware` read it through {@link findModelPrice}, and every one of them takes a
 * `prices` option (entries merged over this table, per model) and a `costUsd` option (a function
 * deciding the cost of each call) to override it. See packages/client/README.md, "Instrumentations".
 *
 * Figures: the providers' published list prices for standard (non-batch) requests, as of the
 * date below. Providers change them; a model missing here is recorded with `costUsd: 0` and
 * `priced: false` in its payload, never guessed.
 */

/** USD per million tokens. */
export interface ModelPrice {
  /** Input (prompt) tokens not read from a cache. */
  readonly input: number;
  /** Output (completion) tokens, reasoning tokens included. */
  readonly output: number;
  /** Input tokens read from the provider's prompt cache. Default: `input`. */
  readonly cachedInput?: number;
  /** Input tokens written to the prompt cache (Anthropic). Default: `input`. */
  readonly cacheWrite?: number;
}

/** Model id → price. A dated id (`gpt-4o-2024-08-06`) takes the price of its longest listed prefix. */
export type PriceTable = Readonly<Record<string, ModelPrice>>;

/** When the figures below were last checked against the providers' price pages. */
export const MODEL_PRICES_CHECKED = '2025-11-24';

export const MODEL_PRICES: PriceTable = Object.freeze({
  // OpenAI (platform.openai.com/docs/pricing)
  'gpt-5': { input: 1.25, cachedInput: 0.125, output: 10 },
  'gpt-5-mini': { input: 0.25, cachedInput: 0.025, output: 2 },
  'gpt-5-nano': { input: 0.05, cachedInput: 0.005, output: 0.4 },
  'gpt-4.1': { input: 2, cachedInput: 0.5, output: 8 },
  'gpt-4.1-mini': { input: 0.4, cachedInput: 0.1, output: 1.6 },
  'gpt-4.1-nano': { input: 0.1, cachedInput: 0.025, output: 0.4 },
  'gpt-4o': { input: 2.5, cachedInput: 1.25, output: 10 },
  'gpt-4o-mini': { input: 0.15, cachedInput: 0.075, output: 0.6 },
  'gpt-4-turbo': { input: 10, output: 30 },
  'gpt-3.5-turbo': { input: 0.5, output: 1.5 },
  o1: { input: 15, cachedInput: 7.5, output: 60 },
  o3: { input: 2, cachedInput: 0.5, output: 8 },
  'o3-mini': { input: 1.1, cachedInput: 0.55, output: 4.4 },
  'o4-mini': { input: 1.1, cachedInput: 0.275, output: 4.4 },
  'text-embedding-3-small': { input: 0.02, output: 0 },
  'text-embedding-3-large': { input: 0.13, output: 0 },
  'text-embedding-ada-002': { input: 0.1, output: 0 },
  // Anthropic (docs.anthropic.com/en/docs/about-claude/pricing); cache writes at the 5-minute rate
  'claude-opus-4-5': { input: 5, cachedInput: 0.5, cacheWrite: 6.25, output: 25 },
  'claude-opus-4-1': { input: 15, cachedInput: 1.5, cacheWrite: 18.75, output: 75 },
  'claude-opus-4': { input: 15, cachedInput: 1.5, cacheWrite: 18.75, output: 75 },
  'claude-sonnet-4-5': { input: 3, cachedInput: 0.3, cacheWrite: 3.75, output: 15 },
  'claude-sonnet-4': { input: 3, cachedInput: 0.3, cacheWrite: 3.75, output: 15 },
  'claude-3-7-sonnet': { input: 3, cachedInput: 0.3, cacheWrite: 3.75, output: 15 },
  'claude-haiku-4-5': { input: 1, cachedInput: 0.1, cacheWrite: 1.25, output: 5 },
  'claude-3-5-haiku': { input: 0.8, cachedInput: 0.08, cacheWrite: 1, output: 4 },
  'claude-3-haiku': { input: 0.25, cachedInput: 0.03, cacheWrite: 0.3, output: 1.25 },
});

/**
 * The price of `model`: its own entry, else the entry of its longest prefix followed by `-` or
 * `@` (`gpt-4o-mini-2024-07-18` → `gpt-4o-mini`, never `gpt-4o`), looked up in `overrides`
 * first and then in {@link MODEL_PRICES}. A provider prefix (`openai/gpt-4o`) is ignored.
 */
export function findModelPrice(model: string, overrides?: PriceTable): ModelPrice | undefined {
  const id = model.includes('/') ? model.slice(model.lastIndexOf('/') + 1) : model;
  for (const table of overrides === undefined ? [MODEL_PRICES] : [overrides, MODEL_PRICES]) {
    const own = Object.hasOwn(table, id) ? table[id] : undefined;
    if (own !== undefined) return own;
    let best: string | undefined;
    for (const key of Object.keys(table))
      if (
        id.length > key.length &&
        id.startsWith(key) &&
        (id[key.length] === '-' || id[key.length] === '@') &&
        (best === undefined || key.length > best.length)
      )
        best = key;
    if (best !== undefined) return table[best];
  }
  return undefined;
}

/** Token counts of one call, by how they are priced. */
export interface PricedTokens {
  /** Input tokens at the plain input price (cache reads and writes not included). */
  input: number;
  output: number;
  cachedInput?: number;
  cacheWrite?: number;
}

/** Per-token prices in 10^-12 USD: integers, so a call's cost is summed exactly. */
function picoPerToken(perMillion: number): number {
  return Math.round(perMillion * 1e6);
}

/**
 * The cost of a call in USD: exact to 10^-12 (the tokens times the integer per-token price in
 * picodollars, divided once), so `12 × 2.5 / 10^6` is `0.00003`, not `0.000029999999999999997`.
 */
export function costOf(price: ModelPrice, tokens: PricedTokens): number {
  const pico =
    tokens.input * picoPerToken(price.input) +
    tokens.output * picoPerToken(price.output) +
    (tokens.cachedInput ?? 0) * picoPerToken(price.cachedInput ?? price.input) +
    (tokens.cacheWrite ?? 0) * picoPerToken(price.cacheWrite ?? price.input);
  return pico / 1e12;
}
