import { mintDevToken } from '../../src/auth/dev-token.js';
import { send } from './http.js';

/**
 * Gives `user` the viewer role on an agent through the admin API of a running server, and
 * returns an identity token for them (signed with the server's JWT_SECRET).
 */
export async function viewerToken(
  server: { url: string; adminToken: string; jwtSecret: string },
  user: string,
  agentId: string,
): Promise<string> {
  const granted = await send(
    server.url,
    `/admin/v1/agents/${agentId}/members/${user}`,
    { role: 'viewer' },
    { method: 'PUT', token: server.adminToken },
  );
  if (granted.status !== 200)
    throw new Error(`granting ${user} a view of ${agentId}: ${granted.status} ${granted.text}`);
  return mintDevToken(server.jwtSecret, user);
}
