import type { BufferBatchItem } from '@flightlog/protocol';
import type { LiveBus } from './live-bus.js';

/**
 * Publishes stored items to the agent's live stream after their commit. The store is primary
 * and the stream a view: a bus that fails or stalls is reported to `onError` and never fails
 * the write, which waits at most `timeoutMs` for it.
 */
export async function publishStored(
  bus: LiveBus,
  agentId: string,
  items: BufferBatchItem[],
  timeoutMs: number,
  onError: (error: unknown) => void,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      onError(new Error(`live publish took longer than ${timeoutMs} ms`));
      resolve();
    }, timeoutMs);
    timer.unref();
  });
  try {
    await Promise.race([
      bus.publish(
        agentId,
        items.map((item) => JSON.stringify(item)),
      ),
      timeout,
    ]);
  } catch (error) {
    onError(error);
  } finally {
    clearTimeout(timer);
  }
}
