import { Type, type Static } from '@sinclair/typebox';
import { IsoDateTime, Nullable, Text } from './primitives.js';
import { TraceStatusSchema } from './trace.js';

/** Optional body of `POST /v1/traces/:id/complete`. Absent fields keep their defaults. */
export const CompleteTraceBodySchema = Type.Object(
  {
    status: Type.Optional(TraceStatusSchema),
    outputSummary: Type.Optional(Nullable(Text(65_536))),
    errorMessage: Type.Optional(Nullable(Text(65_536))),
    endedAt: Type.Optional(IsoDateTime),
  },
  { additionalProperties: false },
);

export type CompleteTraceBody = Static<typeof CompleteTraceBodySchema>;
