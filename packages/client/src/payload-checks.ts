import { FormatRegistry, KindGuard, Type, type TSchema } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import {
  CompleteTraceBodySchema,
  EventSchema,
  PAYLOAD_SCHEMAS,
  STORABLE_TEXT,
  TraceSchema,
  isIsoDateTime,
  type EventType,
} from '@flightlog/protocol';

/*
 * The protocol's schemas are written for the server's Ajv, which compiles patterns with the `u`
 * flag and knows the `Unsafe` string enums. TypeBox's compiler does neither: it would refuse an
 * emoji (a surrogate pair) in storable text and cannot compile the enums. So the client checks
 * an adapted copy: storable text and dates become formats of our own (registered under our own
 * names, leaving any `date-time` format the host registered alone), enums become literal unions.
 * The server-visible schemas are untouched.
 */

const DATE_TIME_FORMAT = 'flightlog-date-time';
const STORABLE_TEXT_FORMAT = 'flightlog-storable-text';
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

// The two texts the client wrote last from instants in range: valid by construction, so the
// envelope check of each event at flush time does not parse its own dates again.
let writtenA = '';
let writtenB = '';

/** Notes a date-time the client wrote itself: `toISOString()` of an instant in the service's range. */
export function noteWrittenDateTime(text: string): void {
  writtenB = writtenA;
  writtenA = text;
}

if (!FormatRegistry.Has(DATE_TIME_FORMAT))
  FormatRegistry.Set(
    DATE_TIME_FORMAT,
    (value) => value === writtenA || value === writtenB || isIsoDateTime(value),
  );
if (!FormatRegistry.Has(STORABLE_TEXT_FORMAT))
  FormatRegistry.Set(
    STORABLE_TEXT_FORMAT,
    (value) => !value.includes('\u0000') && !LONE_SURROGATE.test(value),
  );

function adapt(schema: TSchema): TSchema {
  let out: TSchema = schema;
  if (KindGuard.IsUnsafe(schema) && Array.isArray(schema.enum)) {
    out = Type.Union((schema.enum as string[]).map((value) => Type.Literal(value)));
  } else if (KindGuard.IsString(schema)) {
    const { pattern, format, ...options } = schema;
    if (pattern === STORABLE_TEXT) out = Type.String({ ...options, format: STORABLE_TEXT_FORMAT });
    else if (format === 'date-time') out = Type.String({ ...options, format: DATE_TIME_FORMAT });
  } else if (KindGuard.IsObject(schema)) {
    const properties: Record<string, TSchema> = {};
    for (const [key, value] of Object.entries(schema.properties)) properties[key] = adapt(value);
    out = Type.Object(properties, { additionalProperties: schema.additionalProperties });
  } else if (KindGuard.IsArray(schema)) {
    out = Type.Array(adapt(schema.items), {
      ...(schema.minItems === undefined ? {} : { minItems: schema.minItems }),
      ...(schema.maxItems === undefined ? {} : { maxItems: schema.maxItems }),
    });
  } else if (KindGuard.IsUnion(schema)) {
    out = Type.Union(schema.anyOf.map(adapt));
  }
  return KindGuard.IsOptional(schema) && out !== schema ? Type.Optional(out) : out;
}

function compile<T extends TSchema>(schema: T): TypeCheck<TSchema> {
  return TypeCompiler.Compile(adapt(schema));
}

const payloadChecks: Record<EventType, TypeCheck<TSchema>> = {
  llm_call: TypeCompiler.Compile(PAYLOAD_SCHEMAS.llm_call),
  tool_call: TypeCompiler.Compile(PAYLOAD_SCHEMAS.tool_call),
  chain_tx: TypeCompiler.Compile(PAYLOAD_SCHEMAS.chain_tx),
  x402_payment: TypeCompiler.Compile(PAYLOAD_SCHEMAS.x402_payment),
  mcp_call: TypeCompiler.Compile(PAYLOAD_SCHEMAS.mcp_call),
  custom: TypeCompiler.Compile(PAYLOAD_SCHEMAS.custom),
};

const eventCheck = compile(EventSchema);
const traceCheck = compile(TraceSchema);
const completeBodyCheck = compile(CompleteTraceBodySchema);

function firstError(check: TypeCheck<TSchema>, value: unknown): string {
  const error = check.Errors(value).First();
  return error ? `${error.path || '/'} ${error.message}` : 'does not match the schema';
}

/** True when `payload` has the documented shape of `type` (fast: compiled once). */
export function isPayloadOf(type: EventType, payload: unknown): boolean {
  // Own keys only: a type such as `toString` or `__proto__` from an untyped caller is no type.
  return Object.hasOwn(payloadChecks, type) && payloadChecks[type].Check(payload);
}

const LAMPORTS_FIELD = /^\/(?:lamports|feeLamports|slot)(?:[/ ]|$)/;

/** Why `payload` is not a valid payload of `type` (slow path, for the warning). */
export function payloadProblem(type: EventType, payload: unknown): string {
  if (!Object.hasOwn(payloadChecks, type))
    return `unknown event type "${String(type).slice(0, 40)}"`;
  const problem = firstError(payloadChecks[type], payload);
  if (type === 'chain_tx' && LAMPORTS_FIELD.test(problem))
    return `${problem.split(' ')[0]} must be a non-negative integer: a decimal string, or a number up to 2^53 − 1 (pass larger amounts as strings)`;
  return problem;
}

/** Null when `event` is a valid wire Event, else the first problem. */
export function eventProblem(event: unknown): string | null {
  return eventCheck.Check(event) ? null : firstError(eventCheck, event);
}

/** Null when `trace` is a valid wire Trace, else the first problem. */
export function traceProblem(trace: unknown): string | null {
  return traceCheck.Check(trace) ? null : firstError(traceCheck, trace);
}

/** Null when `body` is a valid body of the complete endpoint, else the first problem. */
export function completeBodyProblem(body: unknown): string | null {
  return completeBodyCheck.Check(body) ? null : firstError(completeBodyCheck, body);
}
