/**
 * Counters of what the client did, for `client.stats()`. Every event the host recorded ends up in
 * exactly one of `deliveredEvents`, `droppedEvents`, or is still buffered or queued; events
 * refused when recorded (malformed) are counted in `invalidEvents` and never enter the buffer.
 */
export interface ClientStats {
  /** Events accepted into the buffer. */
  recordedEvents: number;
  /**
   * Events refused when recorded: malformed payload or fields, or a getter that threw (see the
   * warning for why). They never enter the buffer, and are not in `recordedEvents`.
   */
  invalidEvents: number;
  /** Events in batches the service acknowledged (202, replays included). */
  deliveredEvents: number;
  /**
   * Events recorded but given up on: the backlog cap dropped their batch; the service refused
   * them (a 4xx other than 413: the events or items it named, or the whole batch); their trace's
   * id belongs to another agent (dropped without being sent); retries ran out; `close()` hit its
   * deadline; or the event's envelope or its trace's snapshot failed the wire schema at flush
   * time.
   */
  droppedEvents: number;
  /** Batch requests acknowledged by the service. */
  sentBatches: number;
  /** Acknowledged batches the service already had (`Idempotent-Replayed`: an answer was lost). */
  replayedBatches: number;
  /**
   * Batches given up on whole (refused, or out of retries). A refusal that names only some items
   * or events drops those (counted in `droppedEvents`) and resends the rest: not counted here.
   */
  failedBatches: number;
  /** Requests sent again after a retryable failure. */
  retriedRequests: number;
  /** Events waiting in the buffer for the next flush. */
  bufferedEvents: number;
  /** Estimated bytes in the buffer. */
  bufferedBytes: number;
  /** Flushed batches waiting to be sent (the backlog), the one in flight excluded. */
  queuedBatches: number;
  /** Estimated bytes of the backlog. */
  queuedBytes: number;
}

/** The counters the client keeps; the buffer and backlog figures are read when asked. */
export type ClientCounters = Pick<
  ClientStats,
  | 'recordedEvents'
  | 'invalidEvents'
  | 'deliveredEvents'
  | 'droppedEvents'
  | 'sentBatches'
  | 'replayedBatches'
  | 'failedBatches'
  | 'retriedRequests'
>;

/** Counters of a client that has done nothing yet. */
export function emptyCounters(): ClientCounters {
  return {
    recordedEvents: 0,
    invalidEvents: 0,
    deliveredEvents: 0,
    droppedEvents: 0,
    sentBatches: 0,
    replayedBatches: 0,
    failedBatches: 0,
    retriedRequests: 0,
  };
}
