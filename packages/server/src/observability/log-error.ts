/** An error as it may appear in the logs (a type, not an interface: pino wants an index signature). */
export type LoggedError = {
  type: string;
  message: string;
  code?: string;
  stack: string;
  cause?: LoggedError;
};

/**
 * The log serializer of `err`: name, message, code, stack and cause, and nothing else. Driver
 * errors carry what they failed on as extra fields (ioredis: `command.args`, which for a live
 * publish is the whole batch with its payloads), and pino would log every one of them.
 */
export function serializeError(error: unknown, depth = 0): LoggedError {
  if (!(error instanceof Error))
    return { type: typeof error, message: 'a non-Error was thrown', stack: '' };
  const code = (error as { code?: unknown }).code;
  return {
    type: error.name,
    message: error.message,
    ...(typeof code === 'string' ? { code } : {}),
    stack: error.stack ?? '',
    ...(error.cause !== undefined && depth < 3
      ? { cause: serializeError(error.cause, depth + 1) }
      : {}),
  };
}
