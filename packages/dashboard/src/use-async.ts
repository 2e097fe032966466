import { useEffect, useState } from 'preact/hooks';

export type Async<T> =
  | { state: 'loading' }
  | { state: 'error'; message: string; status?: number }
  | { state: 'done'; value: T };

/** Runs `load` whenever `deps` change; an older answer never overwrites a newer one. */
export function useAsync<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[]): Async<T> {
  const [result, setResult] = useState<Async<T>>({ state: 'loading' });
  useEffect(() => {
    const abort = new AbortController();
    setResult({ state: 'loading' });
    load(abort.signal).then(
      (value) => !abort.signal.aborted && setResult({ state: 'done', value }),
      (error: unknown) => {
        if (abort.signal.aborted) return;
        const status = (error as { status?: unknown }).status;
        setResult({
          state: 'error',
          message: error instanceof Error ? error.message : String(error),
          ...(typeof status === 'number' ? { status } : {}),
        });
      },
    );
    return () => abort.abort();
  }, deps);
  return result;
}
