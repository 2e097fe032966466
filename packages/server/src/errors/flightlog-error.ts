import type { FieldError } from '@flightlog/protocol';

/**
 * Every failure the service reports to a caller has one of these codes. The HTTP layer maps each
 * code to a status and an RFC 9457 problem body in one place (http/problem.ts).
 */
export type ErrorCode =
  | 'malformed-json'
  | 'malformed-request'
  | 'validation-failed'
  | 'unauthorized'
  | 'forbidden'
  | 'not-found'
  | 'id-conflict'
  | 'last-owner'
  | 'request-timeout'
  | 'payload-too-large'
  | 'uri-too-long'
  | 'headers-too-large'
  | 'unsupported-media-type'
  | 'too-many-requests'
  | 'store-unavailable'
  | 'live-unavailable'
  | 'sharing-unavailable'
  | 'shutting-down'
  | 'internal';

export interface FlightlogErrorOptions {
  fieldErrors?: FieldError[];
  retryAfterSeconds?: number;
  cause?: unknown;
}

/** The one coded error type of the service. */
export class FlightlogError extends Error {
  readonly code: ErrorCode;
  readonly fieldErrors: FieldError[] | undefined;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, detail: string, options: FlightlogErrorOptions = {}) {
    super(detail, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'FlightlogError';
    this.code = code;
    this.fieldErrors = options.fieldErrors;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

/** A validation failure naming each offending field by its JSON pointer. */
/** Field errors listed in one answer: enough to fix a batch, bounded for any body. */
export const MAX_FIELD_ERRORS = 100;

export function validationFailed(fieldErrors: FieldError[], detail?: string): FlightlogError {
  const first = fieldErrors[0];
  let summary =
    detail ??
    (first ? `${first.pointer || '(body)'}: ${first.detail}` : 'The request is not valid.');
  if (fieldErrors.length > MAX_FIELD_ERRORS)
    summary += ` The first ${MAX_FIELD_ERRORS} of ${fieldErrors.length} invalid fields are listed.`;
  return new FlightlogError('validation-failed', summary, {
    fieldErrors: fieldErrors.slice(0, MAX_FIELD_ERRORS),
  });
}
