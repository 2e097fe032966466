import { describe, expect, it } from 'vitest';
import { prettyLine } from '../../src/observability/pretty-log.js';

describe('readable log lines (LOG_FORMAT=pretty)', () => {
  const time = Date.UTC(2026, 10, 25, 9, 30, 5);

  it('shows time, level, message and the other fields as key=value, without pid or hostname', () => {
    const line = JSON.stringify({
      level: 30,
      time,
      pid: 7,
      hostname: 'vm',
      reqId: '01K',
      res: { statusCode: 202 },
      msg: 'request completed',
    });
    expect(prettyLine(`${line}\n`, false)).toBe(
      '09:30:05 INFO  request completed reqId=01K res={"statusCode":202}\n',
    );
  });

  it('puts an error stack under its line, and passes a line that is not JSON through', () => {
    const line = JSON.stringify({
      level: 50,
      time,
      err: { message: 'boom', stack: 'Error: boom\n    at here' },
      msg: 'failed',
    });
    expect(prettyLine(line, false)).toBe(
      '09:30:05 ERROR failed\n    Error: boom\n        at here\n',
    );
    expect(prettyLine('plain text', false)).toBe('plain text\n');
  });
});
