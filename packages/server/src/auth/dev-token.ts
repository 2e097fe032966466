import { SignJWT } from 'jose';

/** Mints an HS256 identity token for local development and tests (`flightlog dev-token`). */
export async function mintDevToken(
  secret: string,
  userId: string,
  ttlSeconds = 3600,
): Promise<string> {
  return new SignJWT({})
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(userId)
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSeconds)
    .sign(new TextEncoder().encode(secret));
}
