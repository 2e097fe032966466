/** A promise settled from outside: how waiters (flush, close) learn that a batch is done. */
export class Deferred {
  readonly promise: Promise<void>;
  private settle: () => void = () => undefined;

  constructor() {
    this.promise = new Promise<void>((resolve) => (this.settle = resolve));
  }

  resolve(): void {
    this.settle();
  }
}
