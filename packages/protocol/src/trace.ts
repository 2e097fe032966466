import { Type, type Static } from '@sinclair/typebox';
import {
  Count,
  DecimalString,
  Identifier,
  IntegerString,
  IsoDateTime,
  Milliseconds,
  Nullable,
  STORABLE_TEXT,
  StringEnum,
  TEXT_MAX_LENGTH,
  Text,
} from './primitives.js';

export const TRACE_STATUSES = ['running', 'completed', 'errored', 'timeout'] as const;
export type TraceStatus = (typeof TRACE_STATUSES)[number];

/** Statuses that end a run and queue it for analysis. */
export const ANALYSED_STATUSES: readonly TraceStatus[] = ['completed', 'errored'];

export const TraceStatusSchema = StringEnum(TRACE_STATUSES);

/** A full snapshot of one agent run, as the client sends it at each flush. */
export const TraceSchema = Type.Object(
  {
    id: Identifier,
    agentId: Type.String({ minLength: 1, maxLength: 128, pattern: STORABLE_TEXT }),
    status: TraceStatusSchema,
    startedAt: IsoDateTime,
    inputSummary: Text(TEXT_MAX_LENGTH),
    endedAt: Type.Optional(Nullable(IsoDateTime)),
    durationMs: Type.Optional(Nullable(Milliseconds)),
    outputSummary: Type.Optional(Nullable(Text(TEXT_MAX_LENGTH))),
    errorMessage: Type.Optional(Nullable(Text(TEXT_MAX_LENGTH))),
    tags: Type.Array(Text(256), { maxItems: 256 }),
    eventCount: Count,
    totalTokens: Count,
    totalCostUsd: DecimalString,
    totalLamports: IntegerString,
    chainTxCount: Count,
    toolsCalled: Type.Array(Text(256), { maxItems: 1024 }),
    anchorSignature: Type.Optional(Nullable(Text(256))),
    anchorSlot: Type.Optional(Nullable(IntegerString)),
    merkleProof: Type.Optional(Nullable(Text(TEXT_MAX_LENGTH))),
    traceHash: Type.Optional(Nullable(Text(256))),
    shareToken: Type.Optional(Nullable(Text(256))),
  },
  { additionalProperties: false },
);

export type Trace = Static<typeof TraceSchema>;

/** Body of `GET /v1/agents/:id/traces`: one page of an agent's runs, newest first. */
export const TraceListSchema = Type.Object(
  {
    traces: Type.Array(TraceSchema),
    /** Where the next page starts: pass it as `cursor`, with the same filters; null at the end. */
    nextCursor: Nullable(Type.String()),
    /**
     * Set when a search (`q` or `tag`) stopped at the most one page may read before the page was
     * full: the `startedAt` of the oldest run it searched, where `nextCursor` goes on from. Such a
     * page may hold fewer runs than `limit`, or none: keep following `nextCursor` until it is
     * null. Null on every other page.
     */
    searchedTo: Nullable(IsoDateTime),
  },
  { additionalProperties: false },
);
export type TraceList = Static<typeof TraceListSchema>;
