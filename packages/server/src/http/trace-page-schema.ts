import { EventSchema, TraceSchema } from '@flightlog/protocol';
import { Type } from '@sinclair/typebox';

/** The query of a page of a run's events: how many, and after which (a cursor it gave). */
export const EventPageQuerySchema = Type.Object(
  {
    limit: Type.Optional(Type.String({ maxLength: 10 })),
    cursor: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  { additionalProperties: false },
);

/** A run and one page of its events, as the read API and a share link answer it. */
export const TracePageSchema = Type.Object({
  trace: TraceSchema,
  events: Type.Array(EventSchema),
  nextCursor: Type.Union([Type.String(), Type.Null()]),
});
