// tsc compiles only TypeScript; the numbered SQL migrations are copied next to the compiled store.
// The target is emptied first so a migration removed from the source never lingers in dist.
import { cpSync, rmSync } from 'node:fs';

const from = new URL('../src/store/migrations/', import.meta.url);
const to = new URL('../dist/store/migrations/', import.meta.url);
rmSync(to, { recursive: true, force: true });
cpSync(from, to, { recursive: true });
