import { Type, type Static } from '@sinclair/typebox';
import { IsoDateTime, Nullable, TEXT_MAX_LENGTH, Text } from './primitives.js';
import { TraceStatusSchema } from './trace.js';

/** Optional body of `POST /v1/traces/:id/complete`. Absent fields keep their defaults. */
export const CompleteTraceBodySchema = Type.Object(
  {
    status: Type.Optional(TraceStatusSchema),
    outputSummary: Type.Optional(Nullable(Text(TEXT_MAX_LENGTH))),
    errorMessage: Type.Optional(Nullable(Text(TEXT_MAX_LENGTH))),
    endedAt: Type.Optional(IsoDateTime),
  },
  { additionalProperties: false },
);

export type CompleteTraceBody = Static<typeof CompleteTraceBodySchema>;
