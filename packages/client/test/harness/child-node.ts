import { fileURLToPath } from 'node:url';

export { runNode, type ChildResult } from '@flightlog/test-support';

/** The built client, as a host program imports it (tests that spawn `node` need `npm run build`). */
export const CLIENT_DIST = fileURLToPath(new URL('../../dist/index.js', import.meta.url));
