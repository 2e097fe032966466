/**
 * How an ingest statement refuses a batch that names an id of another agent (or an event id of
 * another trace): a single statement has no RAISE, so its last step casts
 * `'flightlog-id-conflict:<JSON pointer>'` to an integer only when it found such an id. The
 * failing cast aborts the statement, so nothing of the batch is written, and its message carries
 * the pointer of the offending field (never the owner or any stored data).
 */
export const ID_CONFLICT_PREFIX = 'flightlog-id-conflict:';

const ID_CONFLICT_MESSAGE =
  /^invalid input syntax for type integer: "flightlog-id-conflict:(\/items\/\d+\/(?:trace|events\/\d+)\/id)"$/;

/** A batch refused for an id of another owner; `pointer` names the field. */
export class IdConflictError extends Error {
  constructor(readonly pointer: string) {
    super(`id conflict at ${pointer}`);
    this.name = 'IdConflictError';
  }
}

/** The IdConflictError a driver error stands for, if it is that deliberate failure. */
export function idConflictOf(error: unknown): IdConflictError | undefined {
  if (!(error instanceof Error) || (error as { code?: unknown }).code !== '22P02') return undefined;
  const match = ID_CONFLICT_MESSAGE.exec(error.message);
  return match ? new IdConflictError(match[1] as string) : undefined;
}
