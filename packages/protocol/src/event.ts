import { Type, type Static } from '@sinclair/typebox';
import {
  Count,
  Identifier,
  IsoDateTime,
  Milliseconds,
  Nullable,
  StringEnum,
  TEXT_MAX_LENGTH,
  Text,
} from './primitives.js';

export const EVENT_TYPES = [
  'llm_call',
  'tool_call',
  'chain_tx',
  'x402_payment',
  'mcp_call',
  'custom',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export const EVENT_STATUSES = ['ok', 'error'] as const;
export type EventStatus = (typeof EVENT_STATUSES)[number];

/** One instrumented step of a run. `payload` is any object; its shape depends on `type`. */
export const EventSchema = Type.Object(
  {
    id: Identifier,
    traceId: Identifier,
    sequence: Count,
    type: StringEnum(EVENT_TYPES),
    startedAt: IsoDateTime,
    // Static type: an object whose fields are not known here (TypeBox would say `{}`).
    payload: Type.Unsafe<Record<string, unknown>>(Type.Object({}, { additionalProperties: true })),
    status: StringEnum(EVENT_STATUSES),
    payloadEncrypted: Type.Boolean(),
    parentEventId: Type.Optional(Nullable(Identifier)),
    endedAt: Type.Optional(Nullable(IsoDateTime)),
    durationMs: Type.Optional(Nullable(Milliseconds)),
    errorMessage: Type.Optional(Nullable(Text(TEXT_MAX_LENGTH))),
  },
  { additionalProperties: false },
);

export type Event = Static<typeof EventSchema>;
