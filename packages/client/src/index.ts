/**
 * @flightlog/client: the library agents embed to send their runs to Flightlog.
 * See packages/client/README.md.
 */
export { FlightlogClient } from './flightlog-client.js';
export type {
  ClientDependencies,
  CompleteOutcome,
  CompleteTraceOptions,
  FlushResult,
  PayloadMode,
} from './client-core.js';
export type { ClientStats } from './client-stats.js';
export {
  HttpTransport,
  type FieldError,
  type HttpTransportOptions,
  type Transport,
  type TransportOutcome,
} from './http-transport.js';
export type { FlightlogLogger } from './logger.js';
export { PAYLOAD_ALGORITHM } from './payload-cipher.js';
export type {
  EndOptions,
  EventFields,
  FlightlogSession,
  PayloadByType,
  SessionOptions,
  TimedOutcome,
  TimedSpan,
} from './session-types.js';
export {
  DEFAULTS as CLIENT_DEFAULTS,
  ENVIRONMENTS,
  type Environment,
  type FlightlogSettings,
  type RetrySettings,
} from './settings.js';
export { startTimer, type Stopwatch } from './timing.js';
export {
  MODEL_PRICES,
  MODEL_PRICES_CHECKED,
  costOf,
  findModelPrice,
  type ModelPrice,
  type PricedTokens,
  type PriceTable,
} from './model-prices.js';
export type {
  ChainTxPayload,
  CustomPayload,
  EncryptedPayload,
  EventStatus,
  EventType,
  LlmCallPayload,
  LlmMessage,
  McpCallPayload,
  ToolCallPayload,
  TraceStatus,
  X402PaymentPayload,
} from '@flightlog/protocol';
