import { createRemoteJWKSet, errors, jwtVerify, type JWTVerifyGetKey } from 'jose';

export interface IdentityOptions {
  /** HS256 shared secret (`JWT_SECRET`). */
  secret?: string;
  /** JWKS address of an OIDC identity provider (`JWT_JWKS_URL`). */
  jwksUrl?: string;
  /** Required `iss` of JWKS tokens (`JWT_ISSUER`). */
  issuer?: string;
  /** Required `aud` of JWKS tokens (`JWT_AUDIENCE`). */
  audience?: string;
  /** Seconds of clock skew tolerated on exp/nbf. */
  clockToleranceSeconds?: number;
}

export type IdentityResult =
  | { kind: 'verified'; userId: string; expiresAt: number }
  | { kind: 'refused'; reason: 'missing' | 'invalid' | 'expired' | 'not-configured' };

/** Verifies dashboard users' identity JWTs. */
export interface IdentityVerifier {
  verify(token: string | undefined): Promise<IdentityResult>;
}

/**
 * Only these algorithms are accepted: HS256 for the shared secret, asymmetric ones for a JWKS.
 * Keeping the two lists apart is what defeats algorithm confusion (an HS256 token "signed" with
 * a public key) and `alg: none`.
 */
const SECRET_ALGORITHMS = ['HS256'];
const JWKS_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'EdDSA',
];

export function createIdentityVerifier(options: IdentityOptions): IdentityVerifier {
  // Issuer and audience belong to the identity provider (JWKS); the shared secret is for
  // first-party and development tokens (`flightlog dev-token`), which carry neither.
  const verifiers: {
    key: Uint8Array | JWTVerifyGetKey;
    algorithms: string[];
    claims: { issuer?: string; audience?: string };
  }[] = [];
  if (options.secret) {
    verifiers.push({
      key: new TextEncoder().encode(options.secret),
      algorithms: SECRET_ALGORITHMS,
      claims: {},
    });
  }
  if (options.jwksUrl) {
    verifiers.push({
      key: createRemoteJWKSet(new URL(options.jwksUrl), { timeoutDuration: 3_000 }),
      algorithms: JWKS_ALGORITHMS,
      claims: {
        ...(options.issuer ? { issuer: options.issuer } : {}),
        ...(options.audience ? { audience: options.audience } : {}),
      },
    });
  }

  return {
    async verify(token) {
      if (verifiers.length === 0) return { kind: 'refused', reason: 'not-configured' };
      if (!token) return { kind: 'refused', reason: 'missing' };
      let expired = false;
      for (const { key, algorithms, claims } of verifiers) {
        try {
          const { payload } = await jwtVerify(token, key as Uint8Array, {
            algorithms,
            requiredClaims: ['exp', 'sub'],
            clockTolerance: options.clockToleranceSeconds ?? 5,
            ...claims,
          });
          if (typeof payload.sub !== 'string' || payload.sub.length === 0) continue;
          return {
            kind: 'verified',
            userId: payload.sub,
            expiresAt: (payload.exp as number) * 1000,
          };
        } catch (error) {
          if (error instanceof errors.JWTExpired) expired = true;
          // any other failure: try the next verifier, then refuse
        }
      }
      return { kind: 'refused', reason: expired ? 'expired' : 'invalid' };
    },
  };
}
