import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import { FlightlogError } from '../errors/flightlog-error.js';
import type { ExportTraceServiceRequest, ExportTraceServiceResponse } from './otlp-json.js';

/**
 * OTLP/HTTP protobuf bodies, read and written by protobufjs from the official OTLP definitions
 * (vendored under ./proto, see its README): no wire format is parsed by hand here.
 */

const PROTO_DIR = new URL('./proto/', import.meta.url);
const SERVICE = 'opentelemetry/proto/collector/trace/v1/trace_service.proto';

interface Messages {
  request: protobuf.Type;
  response: protobuf.Type;
}

let messages: Messages | undefined;

/** The two messages of the trace service, loaded once, on first use. */
function traceService(): Messages {
  if (messages) return messages;
  const root = new protobuf.Root();
  // imports name files from the root of the definitions ("opentelemetry/proto/…")
  root.resolvePath = (_origin, target) => fileURLToPath(new URL(target, PROTO_DIR));
  root.loadSync(SERVICE, { keepCase: false });
  root.resolveAll();
  // AnyValue's oneof: protobufjs' decoder names the field it read through a setter that
  // `delete`s the six other fields from the message, a quarter of decoding an export and what
  // turns every attribute value into a slow dictionary object. Only toObject's `oneofs` option
  // reads that name, and it is not used here, so AnyValue's message class is made (on first
  // access to `ctor`) with a setter that does nothing.
  const oneOfSetter = protobuf.util.oneOfSetter;
  protobuf.util.oneOfSetter = () => () => {};
  try {
    void root.lookupType('opentelemetry.proto.common.v1.AnyValue').ctor;
  } finally {
    protobuf.util.oneOfSetter = oneOfSetter;
  }
  messages = {
    request: root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest'),
    response: root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse'),
  };
  return messages;
}

/** Fields holding ids (bytes), written in OTLP/JSON as hex rather than base64. */
const ID_FIELDS = ['traceId', 'spanId', 'parentSpanId'] as const;

/** Rewrites a span's or a link's base64 id fields (protobufjs' `bytes: String`) as hex. */
function idsToHex(target: Record<string, unknown>): void {
  for (const field of ID_FIELDS) {
    const value = target[field];
    if (typeof value === 'string') target[field] = Buffer.from(value, 'base64').toString('hex');
  }
}

/**
 * Decodes an ExportTraceServiceRequest into its OTLP/JSON form (64-bit integers as decimal
 * strings, enums as integers, ids in hex, other bytes in base64), the one form the route
 * validates and the mapping reads. Bytes that are not such a message are refused with a 400.
 */
export function decodeExportRequest(bytes: Uint8Array): ExportTraceServiceRequest {
  const { request } = traceService();
  let decoded: unknown;
  try {
    const message = request.decode(bytes);
    decoded = request.toObject(message, {
      longs: String,
      enums: Number,
      bytes: String,
      defaults: false,
      arrays: false,
    });
  } catch (error) {
    // protobufjs throws on truncated or malformed input; a message nested past the stack throws
    // a RangeError: either way the body is not an export request
    const reason = error instanceof Error ? error.message : String(error);
    throw new FlightlogError(
      'malformed-request',
      `The body is not a protobuf ExportTraceServiceRequest: ${reason.slice(0, 200)}`,
    );
  }
  const body = decoded as ExportTraceServiceRequest;
  for (const resource of body.resourceSpans ?? [])
    for (const scope of resource.scopeSpans ?? [])
      for (const span of scope.spans ?? []) {
        idsToHex(span);
        for (const link of span.links ?? []) idsToHex(link);
      }
  return body;
}

/** An ExportTraceServiceResponse in protobuf. */
export function encodeExportResponse(response: ExportTraceServiceResponse): Uint8Array {
  const partial = response.partialSuccess;
  // a full success, the usual answer, is the empty message: no bytes at all
  if (!partial) return new Uint8Array(0);
  const { response: type } = traceService();
  return type
    .encode(
      type.fromObject({
        partialSuccess: {
          rejectedSpans: partial.rejectedSpans,
          errorMessage: partial.errorMessage,
        },
      }),
    )
    .finish();
}
