import { Type, type Static } from '@sinclair/typebox';

/*
 * The OTLP/JSON form of an ExportTraceServiceRequest, as far as Flightlog reads it: the body of
 * `POST /v1/otlp/v1/traces`. A protobuf body is decoded into this same form (otlp-protobuf.ts),
 * so one schema validates both encodings and one mapping reads them (span-mapping.ts).
 *
 * The OTLP specification's JSON rules: keys in lowerCamelCase, trace and span ids as hex strings,
 * 64-bit integers as decimal strings (numbers are accepted too), enums as integers, bytes as
 * base64, and unknown fields ignored (every object here allows more fields). Default values may
 * be left out, so every field is optional. Only the types are checked here; a span with ids or
 * times that make no sense is refused on its own (partial success), not the whole export.
 */

const Open = { additionalProperties: true } as const;

/** int64/uint64/fixed64: a decimal string, or a JSON number. */
const Int64 = Type.Union([Type.String({ pattern: '^-?[0-9]{1,20}$' }), Type.Integer()]);

/** An enum value: its integer (the OTLP rule), or its name (proto3 JSON allows it). */
const EnumValue = Type.Union([Type.Integer(), Type.String({ maxLength: 64 })]);

/**
 * An AnyValue: one of stringValue, boolValue, intValue, doubleValue, arrayValue, kvlistValue,
 * bytesValue. Nested values are read defensively by span-attributes.ts (bounded depth), so the
 * schema does not recurse.
 */
const AnyValue = Type.Object({}, Open);

const KeyValue = Type.Object({ key: Type.String(), value: Type.Optional(AnyValue) }, Open);

const Attributes = Type.Array(KeyValue);

const SpanEvent = Type.Object(
  {
    timeUnixNano: Type.Optional(Int64),
    name: Type.Optional(Type.String()),
    attributes: Type.Optional(Attributes),
  },
  Open,
);

const SpanLink = Type.Object(
  {
    traceId: Type.Optional(Type.String()),
    spanId: Type.Optional(Type.String()),
    attributes: Type.Optional(Attributes),
  },
  Open,
);

const Status = Type.Object(
  { message: Type.Optional(Type.String()), code: Type.Optional(EnumValue) },
  Open,
);

export const OtlpSpanSchema = Type.Object(
  {
    traceId: Type.Optional(Type.String()),
    spanId: Type.Optional(Type.String()),
    traceState: Type.Optional(Type.String()),
    parentSpanId: Type.Optional(Type.String()),
    flags: Type.Optional(Type.Integer({ minimum: 0 })),
    name: Type.Optional(Type.String()),
    kind: Type.Optional(EnumValue),
    startTimeUnixNano: Type.Optional(Int64),
    endTimeUnixNano: Type.Optional(Int64),
    attributes: Type.Optional(Attributes),
    events: Type.Optional(Type.Array(SpanEvent)),
    links: Type.Optional(Type.Array(SpanLink)),
    status: Type.Optional(Status),
  },
  Open,
);

const Scope = Type.Object(
  {
    name: Type.Optional(Type.String()),
    version: Type.Optional(Type.String()),
    attributes: Type.Optional(Attributes),
  },
  Open,
);

const ScopeSpans = Type.Object(
  { scope: Type.Optional(Scope), spans: Type.Optional(Type.Array(OtlpSpanSchema)) },
  Open,
);

const ResourceSpans = Type.Object(
  {
    resource: Type.Optional(Type.Object({ attributes: Type.Optional(Attributes) }, Open)),
    scopeSpans: Type.Optional(Type.Array(ScopeSpans)),
  },
  Open,
);

/** Body of `POST /v1/otlp/v1/traces` in either encoding (protobuf arrives decoded to this). */
export const ExportTraceServiceRequestSchema = Type.Object(
  { resourceSpans: Type.Optional(Type.Array(ResourceSpans)) },
  Open,
);

/** Success body (OTLP/JSON); in protobuf, the same message encoded. */
export const ExportTraceServiceResponseSchema = Type.Object({
  partialSuccess: Type.Optional(
    Type.Object({
      rejectedSpans: Type.Optional(Type.String()),
      errorMessage: Type.Optional(Type.String()),
    }),
  ),
});

export type ExportTraceServiceRequest = Static<typeof ExportTraceServiceRequestSchema>;
export type OtlpResourceSpans = Static<typeof ResourceSpans>;
export type OtlpSpan = Static<typeof OtlpSpanSchema>;
export type OtlpKeyValue = Static<typeof KeyValue>;
export type OtlpSpanEvent = Static<typeof SpanEvent>;

/** What an export answers: how many spans were refused one by one, and why. */
export interface ExportTraceServiceResponse {
  partialSuccess?: { rejectedSpans: number; errorMessage: string };
}

/** The response in its OTLP/JSON form (int64 as a decimal string, as proto3 JSON writes it). */
export function exportResponseJson(response: ExportTraceServiceResponse): string {
  const partial = response.partialSuccess;
  if (!partial) return '{}';
  return JSON.stringify({
    partialSuccess: {
      rejectedSpans: String(partial.rejectedSpans),
      errorMessage: partial.errorMessage,
    },
  });
}
