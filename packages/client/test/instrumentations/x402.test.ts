import { ExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { privateKeyToAccount } from 'viem/accounts';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { observeX402Fetch } from '../../src/instrumentations/x402.js';
import { NETWORK, PAY_TO, PaywalledServer } from '@flightlog/test-support';
import { failingSessions } from '../harness/failing-sessions.js';
import { recordedSession } from '../harness/recorded-session.js';

let server: PaywalledServer;
beforeAll(async () => {
  server = await new PaywalledServer().start();
});
afterAll(() => server.close());

// A throwaway key: it signs EIP-3009 authorizations locally, nothing reaches a chain.
const account = privateKeyToAccount(
  '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
);
const payer = () => new x402Client().register('eip155:*', new ExactEvmScheme(account));

describe('observeX402Fetch against a paywall built with @x402/express', () => {
  it('records the paid request as x402_payment: resource, amount, asset, payee, settlement', async () => {
    const recorded = recordedSession();
    const plain = await wrapFetchWithPayment(fetch, payer())(`${server.url}/forecast`);
    const pay = wrapFetchWithPayment(observeX402Fetch(fetch, recorded.session), payer());
    const response = await pay(`${server.url}/forecast?day=2`);
    expect(recorded.client.stats().recordedEvents).toBe(1);
    expect(response.status).toBe(plain.status);
    expect(await response.json()).toEqual(await plain.json());
    const events = await recorded.events();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'x402_payment', status: 'ok', errorMessage: null });
    const payload = events[0]?.payload as Record<string, unknown>;
    expect(payload).toMatchObject({
      resource: `${server.url}/forecast?day=2`,
      amount: '10000', // $0.01 in USDC's 6 decimals
      network: NETWORK,
      payTo: PAY_TO,
      scheme: 'exact',
      x402Version: 2,
      settled: true,
      payer: account.address,
      httpStatus: 200,
    });
    expect(payload.asset).toMatch(/^0x[0-9a-fA-F]{40}$/);
    expect(payload.txSignature).toMatch(/^0x[0-9a-f]{64}$/);
    expect(server.settlements).toBe(2);
  });

  it('leaves requests without payment unrecorded, and records a refused settlement as an error', async () => {
    const recorded = recordedSession();
    const pay = wrapFetchWithPayment(observeX402Fetch(fetch, recorded.session), payer());
    expect(await (await pay(`${server.url}/free`)).json()).toEqual({ free: true });
    server.refuseSettlement = true;
    try {
      const plain = await wrapFetchWithPayment(
        fetch,
        payer(),
      )(`${server.url}/forecast`).then(
        (r) => r.status,
        (e: unknown) => String(e),
      );
      const wrapped = await pay(`${server.url}/forecast`).then(
        (r) => r.status,
        (e: unknown) => String(e),
      );
      expect(wrapped).toEqual(plain);
    } finally {
      server.refuseSettlement = false;
    }
    const events = await recorded.events();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'x402_payment', status: 'error' });
    expect(events[0]?.payload).toMatchObject({ amount: '10000', settled: false });
  });

  it('records a payment once when both the inner and the paying fetch are wrapped, and concurrent payments once each', async () => {
    const recorded = recordedSession();
    const pay = observeX402Fetch(
      wrapFetchWithPayment(observeX402Fetch(fetch, recorded.session), payer()),
      recorded.session,
    );
    await Promise.all(Array.from({ length: 5 }, (_, i) => pay(`${server.url}/forecast?n=${i}`)));
    const events = await recorded.events();
    expect(events).toHaveLength(5);
    expect(new Set(events.map((e) => (e.payload as { resource: string }).resource)).size).toBe(5);
  });

  it('wrapping only the paying fetch records what its final response tells', async () => {
    const recorded = recordedSession();
    const pay = observeX402Fetch(wrapFetchWithPayment(fetch, payer()), recorded.session);
    await pay(`${server.url}/forecast`);
    await pay(`${server.url}/free`);
    const events = await recorded.events();
    expect(events).toHaveLength(1);
    expect(events[0]?.payload).toMatchObject({
      resource: `${server.url}/forecast`,
      amount: 'unknown',
      asset: 'unknown',
      network: NETWORK,
      settled: true,
      payer: account.address,
    });
  });

  it('passes a network failure through unchanged, and capture: false drops the query', async () => {
    const recorded = recordedSession();
    const failing = (async () => {
      throw new TypeError('fetch failed');
    }) as typeof fetch;
    const pay = wrapFetchWithPayment(observeX402Fetch(failing, recorded.session), payer());
    const error = await pay(`${server.url}/forecast`).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TypeError);
    const quiet = wrapFetchWithPayment(
      observeX402Fetch(fetch, recorded.session, { capture: false }),
      payer(),
    );
    await quiet(`${server.url}/forecast?token=secret`);
    const events = await recorded.events();
    expect(events).toHaveLength(1); // the failure happened before any payment
    expect(events[0]?.payload).toMatchObject({
      resource: `${server.url}/forecast`,
      captured: false,
    });
  });

  it("reads x402 v1's headers too (X-PAYMENT, X-PAYMENT-RESPONSE), as x402-fetch 1.x sends them", async () => {
    const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64');
    const v1 = http.createServer((req, res) => {
      if (req.headers['x-payment'] === undefined) {
        res.writeHead(402, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({ x402Version: 1, accepts: [], error: 'X-PAYMENT header is required' }),
        );
        return;
      }
      res.writeHead(200, {
        'content-type': 'application/json',
        'x-payment-response': b64({
          success: true,
          transaction: '0xfeed',
          network: 'base-sepolia',
          payer: '0xpayer',
        }),
      });
      res.end('{"ok":true}');
    });
    await new Promise<void>((resolve) => v1.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(v1.address() as AddressInfo).port}/weather`;
    try {
      const recorded = recordedSession();
      const observed = observeX402Fetch(fetch, recorded.session);
      expect((await observed(url)).status).toBe(402); // the unpaid try: not recorded
      const paid = await observed(url, {
        headers: {
          'X-PAYMENT': b64({
            x402Version: 1,
            scheme: 'exact',
            network: 'base-sepolia',
            payload: {
              signature: '0xsig',
              authorization: { from: '0xpayer', to: PAY_TO, value: '2500' },
            },
          }),
        },
      });
      expect(await paid.json()).toEqual({ ok: true });
      const events = await recorded.events();
      expect(events).toHaveLength(1);
      expect(events[0]?.payload).toEqual({
        resource: url,
        amount: '2500',
        asset: 'unknown',
        network: 'base-sepolia',
        scheme: 'exact',
        payTo: PAY_TO,
        x402Version: 1,
        txSignature: '0xfeed',
        settled: true,
        payer: '0xpayer',
        httpStatus: 200,
      });
    } finally {
      v1.closeAllConnections();
      await new Promise((resolve) => v1.close(resolve));
    }
  });
});

describe('observeX402Fetch: failures of its own', () => {
  it('never throws into the host: when its own recording fails, paid requests give what they give unwrapped', async () => {
    const plain = await wrapFetchWithPayment(fetch, payer())(`${server.url}/forecast`);
    const plainBody: unknown = await plain.json();
    const settlements = server.settlements;
    const failing = failingSessions();
    for (const { name, session, failedAsExpected } of failing) {
      // wrapped inside the paying fetch, and the paying fetch itself
      for (const pay of [
        wrapFetchWithPayment(observeX402Fetch(fetch, session), payer()),
        observeX402Fetch(wrapFetchWithPayment(fetch, payer()), session),
      ]) {
        const response = await pay(`${server.url}/forecast`);
        expect(response.status, name).toBe(plain.status);
        expect(response.headers.get('payment-response'), name).not.toBeNull();
        expect(await response.json(), name).toEqual(plainBody);
      }
      const broken = (async () => {
        throw new TypeError('fetch failed');
      }) as typeof fetch;
      const error = await wrapFetchWithPayment(
        observeX402Fetch(broken, session),
        payer(),
      )(`${server.url}/forecast`).catch((e: unknown) => e);
      expect(error, name).toBeInstanceOf(TypeError);
      expect((error as Error).message, name).toBe('fetch failed');
      failedAsExpected();
    }
    expect(server.settlements).toBe(settlements + 2 * failing.length);
  });
});
