import type { LabelledRun } from './labelled-run.js';
import { newId } from '../../fixtures/batches.js';
import { runOf, signature } from './run-builder.js';

/** A step fails because a step inside it failed: the cause is the deepest failing one. */
export const NESTED_FAILURES: LabelledRun[] = [
  {
    id: 'nested-two-levels',
    shape: 'nested failure',
    why: 'fetch.prices could not connect to the price service; plan only failed because of it',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Plan a DCA into SOL',
        error: 'plan failed: child step failed',
      });
      r.wrap('custom', { name: 'plan' }, { error: 'plan failed: child step failed' }, () => {
        r.llm('gpt-4o-mini');
        r.tool(
          'fetch.prices',
          { pairs: ['SOL/USDC'] },
          {
            error: 'connect ECONNREFUSED 10.0.0.5:443',
          },
        );
      });
      return r.done();
    },
    mustContain: ['fetch.prices', 'ECONNREFUSED 10.0.0.5:443'],
    mustNotContain: ['child step failed', 'custom plan failed'],
  },
  {
    id: 'nested-three-levels',
    shape: 'nested failure',
    why: 'http.get could not resolve the internal API host, three levels down',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Research the three largest holders',
        error: 'agent.run failed',
      });
      r.wrap('tool_call', { name: 'agent.run', input: {} }, { error: 'step failed' }, () => {
        r.llm('gpt-4o');
        r.wrap(
          'tool_call',
          { name: 'research', input: { topic: 'holders' } },
          { error: 'step failed' },
          () => {
            r.tool('http.get', { url: 'https://api.example.internal/holders' }, { ms: 800 });
            r.tool(
              'http.get',
              { url: 'https://api.example.internal/holders?page=2' },
              { error: 'getaddrinfo ENOTFOUND api.example.internal' },
            );
          },
        );
      });
      return r.done();
    },
    mustContain: ['http.get', 'ENOTFOUND api.example.internal'],
    mustNotContain: ['step failed', 'agent.run failed'],
  },
  {
    id: 'nested-five-levels-mcp',
    shape: 'nested failure',
    why: 'the database MCP tool was denied access to the invoices table, five levels down',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Reconcile October invoices',
        error: 'workflow failed',
      });
      const wrapFail = (name: string, body: () => void) =>
        r.wrap('custom', { name }, { error: `${name} failed` }, body);
      wrapFail('workflow', () =>
        wrapFail('reconcile', () =>
          wrapFail('load', () =>
            wrapFail('load.invoices', () => {
              r.mcp('postgres', 'list_tables', {});
              r.mcp(
                'postgres',
                'query',
                { sql: 'SELECT * FROM invoices' },
                {
                  error: 'permission denied for table invoices',
                },
              );
            }),
          ),
        ),
      );
      return r.done();
    },
    mustContain: ['postgres/query', 'permission denied for table invoices'],
    mustNotContain: ['workflow failed', 'load.invoices failed'],
  },
  {
    id: 'nested-chain-tx-under-tool',
    shape: 'nested failure',
    why: 'the route transaction failed simulation (slippage), which failed swap.execute',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Swap 1 SOL for USDC, slippage under 0.5 %',
        error: 'Swap failed',
      });
      r.llm('gpt-4o-mini');
      r.wrap(
        'tool_call',
        { name: 'swap.execute', input: { amount: '1000000000' } },
        { error: 'swap failed' },
        () => {
          r.tool('jupiter.quote', { inputMint: 'SOL', outputMint: 'USDC' });
          r.tx('route', '1000000000', {
            signature: signature('5VfYmGBjRoute'),
            programId: 'JUP6LkbZbjS1jKKwapdHNy74zcZ3tLUZoi5QNyVTaV4',
            error: 'Transaction simulation failed: slippage tolerance exceeded (0x1771)',
            ms: 2_400,
          });
        },
      );
      return r.done();
    },
    mustContain: ['route', 'slippage tolerance exceeded', '5VfYmGBj'],
    mustNotContain: ['swap failed', 'swap.execute failed'],
  },
  {
    id: 'nested-x402-under-tool',
    shape: 'nested failure',
    why: 'the x402 payment inside research.fetch failed: its authorization had expired',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Summarise the paid analyst report',
        error: 'research.fetch failed',
      });
      r.wrap(
        'tool_call',
        { name: 'research.fetch', input: { id: 'r-77' } },
        { error: 'could not fetch' },
        () => {
          r.pay('https://reports.example/r-77', '1.5', {
            error: 'payment verification failed: authorization expired',
          });
        },
      );
      return r.done();
    },
    mustContain: ['https://reports.example/r-77', 'authorization expired'],
    mustNotContain: ['could not fetch'],
  },
  {
    id: 'nested-same-message-bubbled',
    shape: 'nested failure',
    why: 'quote.fetch timed out; the same exception bubbled up through its wrappers',
    run: () => {
      const message = 'Timeout awaiting response from quote API after 10000 ms';
      const r = runOf({ status: 'errored', input: 'Quote 5 SOL', error: message });
      r.wrap('tool_call', { name: 'pipeline', input: {} }, { error: message }, () => {
        r.wrap('tool_call', { name: 'quote.step', input: {} }, { error: message }, () => {
          r.tool('quote.fetch', { amount: 5 }, { error: message, ms: 10_000 });
        });
      });
      return r.done();
    },
    mustContain: ['quote.fetch', 'Timeout awaiting response'],
    mustNotContain: ['tool_call pipeline failed', 'tool_call quote.step failed'],
  },
  {
    id: 'nested-handled-child-then-real-failure',
    shape: 'nested failure',
    why: 'a cache miss was handled inside an ok step; the run failed later because the order was rejected',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Place the limit order',
        error: 'Order rejected',
      });
      r.wrap('tool_call', { name: 'prices.load', input: {} }, {}, () => {
        r.tool('cache.get', { key: 'px:SOL' }, { error: 'cache miss' });
        r.tool('price.api', { pair: 'SOL/USDC' });
      });
      r.llm('gpt-4o-mini');
      r.tool(
        'orders.place',
        { side: 'buy', price: 148.1 },
        {
          error: 'order rejected: price outside the allowed band (±5 %)',
        },
      );
      return r.done();
    },
    mustContain: ['orders.place', 'price outside the allowed band'],
    mustNotContain: ['cache miss', 'cache.get'],
  },
  {
    id: 'failure-led-by-finished-parents',
    shape: 'nested failure',
    why: 'the route transaction failed; its parents (plan, quote) had ended before it and only led there',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Swap 2 SOL for JUP',
        error: 'swap failed',
      });
      const plan = r.llm('gpt-4o-mini', { prompt: 'Plan the swap' });
      const quote = r.tool('jupiter.quote', { inputMint: 'SOL', outputMint: 'JUP' });
      r.patch(quote, (e) => (e.parentEventId = plan));
      r.llm('gpt-4o');
      const tx = r.tx('route', '2000000000', {
        signature: signature('2RouteLedBy'),
        error: 'Transaction simulation failed: insufficient funds for rent',
      });
      r.patch(tx, (e) => (e.parentEventId = quote));
      return r.done();
    },
    mustContain: ['route', 'insufficient funds for rent', '2RouteLedBy'],
    mustNotContain: ['handled', 'jupiter.quote failed'],
  },
  {
    id: 'nested-failure-through-finished-parent',
    shape: 'nested failure',
    why: 'inside swap.run, the quote led to a transfer that failed; swap.run failed because of it',
    run: () => {
      const r = runOf({ status: 'errored', input: 'Swap and send', error: 'swap.run failed' });
      r.wrap('tool_call', { name: 'swap.run', input: {} }, { error: 'swap.run failed' }, () => {
        const quote = r.tool('dex.quote', { pair: 'SOL/USDC' });
        const tx = r.tx('transfer', '900000000', {
          signature: signature('4TransferUnder'),
          error: 'custom program error: 0x1 (insufficient funds)',
        });
        r.patch(tx, (e) => (e.parentEventId = quote));
      });
      return r.done();
    },
    mustContain: ['transfer', 'custom program error: 0x1', '4TransferUnd'],
    mustNotContain: ['swap.run failed', 'handled'],
  },
  {
    id: 'nested-silent-leaf',
    shape: 'nested failure',
    why: 'sign.tx failed without a message; its parent says why (the hardware wallet was locked)',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Sign and send the payout',
        error: 'payout failed',
      });
      r.wrap(
        'tool_call',
        { name: 'wallet.send', input: {} },
        { error: 'hardware wallet locked: unlock it and retry' },
        () => {
          r.tool('sign.tx', { account: 'payout' }, { failedSilently: true });
        },
      );
      return r.done();
    },
    mustContain: ['sign.tx', 'hardware wallet locked'],
    mustNotContain: ['loop'],
  },
  {
    id: 'nested-parent-left-out',
    shape: 'nested failure',
    why: 'the insert failed on a unique key; its parent lies in the left-out middle of a long run',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Import the ledger',
        error: 'import failed',
        omittedEvents: 5_000,
      });
      r.tool('ledger.open', { file: 'ledger.csv' });
      r.tool('ledger.batch', { n: 1 });
      const failing = r.tool(
        'db.insert',
        { table: 'entries' },
        { error: 'duplicate key value violates unique constraint "entries_pkey"' },
      );
      // its parent was not loaded: it is in the middle the store left out
      r.patch(failing, (e) => {
        e.parentEventId = newId();
        e.sequence = 5_002;
      });
      return r.done();
    },
    mustContain: ['db.insert', 'duplicate key value'],
    mustNotContain: ['ledger.batch failed'],
  },
];
