import { createHash } from 'node:crypto';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ExactEvmScheme } from '@x402/evm/exact/server';
import { paymentMiddleware, x402ResourceServer } from '@x402/express';
import express from 'express';

export const NETWORK = 'eip155:84532'; // Base Sepolia
export const PAY_TO = '0x209693Bc6afc0C5328bA36FaF03C514EF312287C';

/**
 * An API behind an x402 paywall, built with x402's own Express middleware (`@x402/express`):
 * `GET /forecast` costs $0.01 in USDC on Base Sepolia, `GET /free` nothing. The facilitator —
 * in production a remote service that verifies the signed authorization and submits it on
 * chain — is a local one here that accepts every well-formed payment and settles it with a
 * transaction hash derived from its signature (or refuses to settle, when told to).
 */
export class PaywalledServer {
  settlements = 0;
  refuseSettlement = false;
  private server: http.Server | undefined;

  async start(): Promise<this> {
    const facilitator = {
      verify: async (payload: { payload: { authorization?: { from?: string } } }) => ({
        isValid: true,
        payer: payload.payload.authorization?.from ?? '',
      }),
      settle: async (
        payload: { payload: { signature?: string; authorization?: { from?: string } } },
        requirements: { network: string },
      ) => {
        if (this.refuseSettlement)
          return {
            success: false,
            errorReason: 'insufficient_funds',
            transaction: '',
            network: requirements.network,
          };
        this.settlements += 1;
        const hash = createHash('sha256')
          .update(payload.payload.signature ?? '')
          .digest('hex');
        return {
          success: true,
          transaction: `0x${hash}`,
          network: requirements.network,
          payer: payload.payload.authorization?.from ?? '',
        };
      },
      getSupported: async () => ({
        kinds: [{ x402Version: 2, scheme: 'exact', network: NETWORK }],
        extensions: [],
        signers: {},
      }),
    };
    const resourceServer = new x402ResourceServer(facilitator as never).register(
      NETWORK,
      new ExactEvmScheme(),
    );
    const app = express();
    app.use(
      paymentMiddleware(
        {
          'GET /forecast': {
            accepts: { scheme: 'exact', price: '$0.01', network: NETWORK, payTo: PAY_TO },
            description: 'Tomorrow in Lisbon',
          },
        },
        resourceServer,
      ),
    );
    app.get('/forecast', (_req, res) => {
      res.json({ city: 'Lisbon', tomorrow: 'sunny' });
    });
    app.get('/free', (_req, res) => {
      res.json({ free: true });
    });
    await new Promise<void>((resolve) => {
      this.server = app.listen(0, '127.0.0.1', () => resolve());
    });
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server?.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}
