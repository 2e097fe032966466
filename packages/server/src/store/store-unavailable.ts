import { FlightlogError } from '../errors/flightlog-error.js';
import { IdConflictError, idConflictOf } from './id-conflict.js';

const CONNECTION_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);

/** Foreign keys to `agents` that ingest writes through (store/migrations/001_initial.sql). */
const AGENT_REFERENCES = new Set(['accepted_batches_agent_id_fkey', 'traces_agent_id_fkey']);

/**
 * True when an error from a database driver means the database cannot be reached right now
 * (as opposed to a bug or a constraint violation): the request may succeed if retried later.
 */
export function isUnreachable(error: unknown): boolean {
  if (error instanceof FlightlogError) return error.code === 'store-unavailable';
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (CONNECTION_ERROR_CODES.has(code)) return true;
    // SQLSTATE 08: connection exception; 57P0x: server shutting down; 53300: too many connections;
    // 57014: statement timeout (the database is too slow to answer in time).
    if (code.startsWith('08') || /^57P0[1-4]$/.test(code) || code === '53300' || code === '57014')
      return true;
  }
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection closed|PGlite is closed|Query read timeout|Cannot use a pool after calling end/i.test(
    error.message,
  );
}

export function storeUnavailable(cause: unknown): FlightlogError {
  return new FlightlogError('store-unavailable', 'The trace store is unreachable; retry later.', {
    retryAfterSeconds: 1,
    cause,
  });
}

/** Rethrows driver errors that mean "unreachable" as the coded store-unavailable error. */
export function translateDriverError(error: unknown): never {
  if (error instanceof FlightlogError || error instanceof IdConflictError) throw error;
  if (isUnreachable(error)) throw storeUnavailable(error);
  // An ingest statement refusing a batch on purpose (see id-conflict.ts), not a bad value.
  const conflict = idConflictOf(error);
  if (conflict) throw conflict;
  // SQLSTATE 23503 on a row's agent: the agent was deleted while a request held its key (another
  // instance deleted it, and this one's key cache has not expired yet). The key is gone with it.
  const code = (error as { code?: unknown }).code;
  const constraint = (error as { constraint?: unknown }).constraint;
  if (code === '23503' && typeof constraint === 'string' && AGENT_REFERENCES.has(constraint))
    throw new FlightlogError('unauthorized', 'The API key is unknown or revoked.', {
      cause: error,
    });
  // SQLSTATE 22: a value the database cannot hold. The schemas are meant to refuse these first;
  // this keeps any they miss a client error rather than a 500.
  if (typeof code === 'string' && code.startsWith('22'))
    throw new FlightlogError('validation-failed', 'A value in the request cannot be stored.', {
      fieldErrors: [],
      cause: error,
    });
  throw error;
}
