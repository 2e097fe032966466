import type { FlightlogLogger } from '../../src/logger.js';

/** A logger that keeps every warning, for tests to assert what a user would read. */
export class RecordingLogger implements FlightlogLogger {
  readonly lines: { message: string; context?: object }[] = [];

  warn(message: string, context?: object): void {
    this.lines.push(context === undefined ? { message } : { message, context });
  }

  /** Messages containing `text`. */
  matching(text: string): string[] {
    return this.lines.map((l) => l.message).filter((m) => m.includes(text));
  }
}
