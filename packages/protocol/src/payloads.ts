/**
 * Payload shapes of the six event types. The spec fixes `llm_call`; the others are Flightlog's
 * own (see the README). The server accepts any object payload; the client fills these shapes.
 * Extra fields are allowed everywhere.
 */

export interface LlmMessage {
  role: string;
  content: string;
}

export interface LlmCallPayload {
  provider: string;
  model: string;
  input: { messages: LlmMessage[] };
  output: { content: string; finishReason: string };
  usage: { inputTokens: number; outputTokens: number; totalTokens: number };
  costUsd: number;
  streamed: boolean;
  [extra: string]: unknown;
}

export interface ToolCallPayload {
  /** Feeds the trace's de-duplicated `toolsCalled`. */
  name: string;
  input?: unknown;
  output?: unknown;
  [extra: string]: unknown;
}

export type SolanaNetwork = 'devnet' | 'mainnet';

export interface ChainTxPayload {
  signature: string | null;
  /** Decimal string; feeds the trace's `totalLamports`. */
  lamports: string;
  network?: SolanaNetwork;
  programId?: string;
  instruction?: string;
  feeLamports?: string;
  slot?: string;
  confirmation?: 'processed' | 'confirmed' | 'finalized' | 'failed';
  [extra: string]: unknown;
}

export interface X402PaymentPayload {
  resource: string;
  amount: string;
  asset: string;
  network?: string;
  payTo?: string;
  txSignature?: string | null;
  settled?: boolean;
  [extra: string]: unknown;
}

export interface McpCallPayload {
  server: string;
  method: string;
  tool?: string;
  input?: unknown;
  output?: unknown;
  [extra: string]: unknown;
}

export interface CustomPayload {
  name: string;
  data?: unknown;
  [extra: string]: unknown;
}

/** An encrypted payload as it travels when the client has `SERVICE_MASTER_KEY`. */
export interface EncryptedPayload {
  alg: 'AES-256-GCM';
  iv: string;
  tag: string;
  ciphertext: string;
}
