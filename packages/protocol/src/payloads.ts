import { Type } from '@sinclair/typebox';

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
  /**
   * A non-negative integer: a decimal string (any size, up to 80 digits) or a number up to
   * 2^53 − 1 (larger ones are not exact as numbers). Feeds the trace's `totalLamports`.
   */
  lamports: string | number;
  network?: SolanaNetwork;
  programId?: string;
  instruction?: string;
  /** Like `lamports`. */
  feeLamports?: string | number;
  /** Like `lamports`. */
  slot?: string | number;
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

/*
 * TypeBox schemas of the payload shapes above, for the client library to check what it records.
 * The server does not use them (it accepts any object payload), so they may be stricter than the
 * wire contract where the client computes aggregates from a field. Enumerations are unions of
 * literals so that TypeBox's compiler can check them without a custom kind.
 */

const Integer = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER });
/** A non-negative integer as a decimal string (exact at any size), or as a number while exact. */
const Lamports = Type.Union([
  Type.String({ maxLength: 80, pattern: '^(?:0|[1-9][0-9]*)$' }),
  Integer,
]);
const Open = { additionalProperties: true } as const;

/** `llm_call` payload (the spec's shape). `usage.totalTokens` and `costUsd` feed the trace totals. */
export const LlmCallPayloadSchema = Type.Object(
  {
    provider: Type.String(),
    model: Type.String(),
    input: Type.Object(
      { messages: Type.Array(Type.Object({ role: Type.String(), content: Type.String() }, Open)) },
      Open,
    ),
    output: Type.Object({ content: Type.String(), finishReason: Type.String() }, Open),
    usage: Type.Object({ inputTokens: Integer, outputTokens: Integer, totalTokens: Integer }, Open),
    costUsd: Type.Number({ minimum: 0 }),
    streamed: Type.Boolean(),
  },
  Open,
);

/** `tool_call` payload; `name` feeds the trace's `toolsCalled`. */
export const ToolCallPayloadSchema = Type.Object(
  {
    name: Type.String({ minLength: 1 }),
    input: Type.Optional(Type.Unknown()),
    output: Type.Optional(Type.Unknown()),
  },
  Open,
);

/**
 * `chain_tx` payload; `lamports` (a non-negative integer: a decimal string, or a number up to
 * 2^53 − 1) feeds `totalLamports`.
 */
export const ChainTxPayloadSchema = Type.Object(
  {
    signature: Type.Union([Type.String(), Type.Null()]),
    lamports: Lamports,
    network: Type.Optional(Type.Union([Type.Literal('devnet'), Type.Literal('mainnet')])),
    programId: Type.Optional(Type.String()),
    instruction: Type.Optional(Type.String()),
    feeLamports: Type.Optional(Lamports),
    slot: Type.Optional(Lamports),
    confirmation: Type.Optional(
      Type.Union([
        Type.Literal('processed'),
        Type.Literal('confirmed'),
        Type.Literal('finalized'),
        Type.Literal('failed'),
      ]),
    ),
  },
  Open,
);

/** `x402_payment` payload. */
export const X402PaymentPayloadSchema = Type.Object(
  {
    resource: Type.String(),
    amount: Type.String(),
    asset: Type.String(),
    network: Type.Optional(Type.String()),
    payTo: Type.Optional(Type.String()),
    txSignature: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    settled: Type.Optional(Type.Boolean()),
  },
  Open,
);

/** `mcp_call` payload. */
export const McpCallPayloadSchema = Type.Object(
  {
    server: Type.String(),
    method: Type.String(),
    tool: Type.Optional(Type.String()),
    input: Type.Optional(Type.Unknown()),
    output: Type.Optional(Type.Unknown()),
  },
  Open,
);

/** `custom` payload. */
export const CustomPayloadSchema = Type.Object(
  { name: Type.String({ minLength: 1 }), data: Type.Optional(Type.Unknown()) },
  Open,
);

/** The payload schema of each event type. */
export const PAYLOAD_SCHEMAS = {
  llm_call: LlmCallPayloadSchema,
  tool_call: ToolCallPayloadSchema,
  chain_tx: ChainTxPayloadSchema,
  x402_payment: X402PaymentPayloadSchema,
  mcp_call: McpCallPayloadSchema,
  custom: CustomPayloadSchema,
} as const;

/**
 * Envelope of an encrypted payload (`payloadEncrypted: true`): AES-256-GCM with a fresh random
 * 96-bit IV, no additional authenticated data; `iv` (12 bytes), `tag` (16 bytes) and `ciphertext`
 * are standard base64; the plaintext is the UTF-8 JSON text of the payload object.
 */
export const EncryptedPayloadSchema = Type.Object(
  {
    alg: Type.Literal('AES-256-GCM'),
    iv: Type.String(),
    tag: Type.String(),
    ciphertext: Type.String(),
  },
  { additionalProperties: false },
);
