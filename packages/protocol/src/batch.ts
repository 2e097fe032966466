import { Type, type Static } from '@sinclair/typebox';
import { EventSchema } from './event.js';
import { BatchId } from './primitives.js';
import { TraceSchema } from './trace.js';

/** Limits of one batch request; the server enforces them and documents them in the README. */
export const BATCH_LIMITS = {
  maxItems: 1000,
  maxEventsPerItem: 10_000,
} as const;

/** One trace snapshot and the events added since the previous flush. */
export const BufferBatchItemSchema = Type.Object(
  {
    trace: TraceSchema,
    events: Type.Array(EventSchema, { maxItems: BATCH_LIMITS.maxEventsPerItem }),
  },
  { additionalProperties: false },
);

/** Request body of `POST /v1/traces/batch`. */
export const TransportBatchPayloadSchema = Type.Object(
  {
    batchId: BatchId,
    items: Type.Array(BufferBatchItemSchema, { minItems: 1, maxItems: BATCH_LIMITS.maxItems }),
    // Only matched against a verify token, never trusted: any text is accepted (a value that
    // is not the key's agent simply does not verify), so a client's display name here cannot
    // cost it the batch.
    agentId: Type.Optional(Type.String({ maxLength: 1024 })),
    verifyToken: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  { additionalProperties: false },
);

/** Success body of `POST /v1/traces/batch` (202) and of the complete endpoint (200). */
export const TraceIdResponseSchema = Type.Object(
  { traceId: Type.String() },
  { additionalProperties: false },
);

export type BufferBatchItem = Static<typeof BufferBatchItemSchema>;
export type TransportBatchPayload = Static<typeof TransportBatchPayloadSchema>;
export type TraceIdResponse = Static<typeof TraceIdResponseSchema>;
