/**
 * A logger that keeps every warning, for tests to assert what a user would read. It has the
 * shape of the client's `FlightlogLogger` (this package does not depend on the client, whose
 * tests use it).
 */
export class RecordingLogger {
  readonly lines: { message: string; context?: object }[] = [];

  warn(message: string, context?: object): void {
    this.lines.push(context === undefined ? { message } : { message, context });
  }

  /** Messages containing `text`. */
  matching(text: string): string[] {
    return this.lines.map((l) => l.message).filter((m) => m.includes(text));
  }
}
