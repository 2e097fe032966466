/**
 * Large writes take turns per agent: at most one large batch of an agent is in the store at a
 * time, the agent's others wait in line (a bounded line). A batch of 10,000 events is a
 * statement of a few hundred milliseconds; ten at once from one agent held, on PostgreSQL, a
 * core and a connection each, and on PGlite (one statement at a time, on the event loop) queued
 * ten statements ahead of every other agent's. One at a time, another agent waits for at most
 * one of them, and the agent that sends them is the one that waits for the rest.
 */
export class AgentWriteTurns {
  /** Per agent with a large write in the store: what waits for its turn after it. */
  private readonly lines = new Map<string, (() => void)[]>();

  /** `maxWaiting`: large batches of one agent that may wait for their turn at once. */
  constructor(private readonly maxWaiting: number) {}

  /**
   * Runs `write` in the agent's turn; `undefined` without running it when `maxWaiting` of the
   * agent's batches wait already (the caller refuses the batch: retry later).
   */
  async inTurn<T>(agentId: string, write: () => Promise<T>): Promise<T | undefined> {
    const line = this.lines.get(agentId);
    if (line) {
      if (line.length >= this.maxWaiting) return undefined;
      await new Promise<void>((resolve) => line.push(resolve));
    } else this.lines.set(agentId, []);
    try {
      return await write();
    } finally {
      const waiting = this.lines.get(agentId);
      const next = waiting?.shift();
      // the next one after a turn of the event loop: requests of other agents that arrived
      // during this write reach the store first (on PGlite the two statements would
      // otherwise run back to back, the loop blocked throughout)
      if (next) setImmediate(next);
      else this.lines.delete(agentId);
    }
  }
}
