import type { LogDestination } from '../app.js';

const LEVELS: Record<number, [name: string, color: string]> = {
  10: ['TRACE', '90'],
  20: ['DEBUG', '36'],
  30: ['INFO ', '32'],
  40: ['WARN ', '33'],
  50: ['ERROR', '31'],
  60: ['FATAL', '35'],
};

/** Fields every line has, or that the line shows in its own place. */
const SHOWN_APART = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'err']);

function value(field: unknown): string {
  return typeof field === 'string' && !/\s/.test(field) ? field : JSON.stringify(field);
}

/**
 * One pino JSON line as a person reads it in a terminal: `12:00:01 INFO  message key=value`,
 * an error's stack under it. A line that is not JSON passes through as it is.
 */
export function prettyLine(line: string, color: boolean): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line.endsWith('\n') ? line : `${line}\n`;
  }
  const paint = (code: string, text: string) => (color ? `\u001b[${code}m${text}\u001b[0m` : text);
  const [name, code] = LEVELS[Number(entry.level)] ?? ['LOG  ', '0'];
  const time =
    typeof entry.time === 'number' ? new Date(entry.time).toISOString().slice(11, 19) : '';
  const fields = Object.entries(entry)
    .filter(([key]) => !SHOWN_APART.has(key))
    .map(([key, field]) => `${paint('90', `${key}=`)}${value(field)}`);
  const head = [paint('90', time), paint(code, name), String(entry.msg ?? ''), ...fields]
    .filter(Boolean)
    .join(' ');
  const err = entry.err as { stack?: unknown; message?: unknown } | undefined;
  const stack = err
    ? `\n    ${String(err.stack ?? err.message)
        .split('\n')
        .join('\n    ')}`
    : '';
  return `${head}${stack}\n`;
}

/** A pino destination writing readable lines to `out` (a terminal), colored when asked. */
export function prettyLogDestination(
  out: { write(text: string): unknown },
  color: boolean,
): LogDestination {
  return { write: (line) => void out.write(prettyLine(line, color)) };
}
