// tsc compiles only TypeScript; the numbered SQL migrations and the vendored OTLP .proto files are
// copied next to the compiled modules that read them. Each target is emptied first, so a file
// removed from the source never lingers in dist.
import { cpSync, rmSync } from 'node:fs';

for (const folder of ['store/migrations/', 'otlp/proto/']) {
  const from = new URL(`../src/${folder}`, import.meta.url);
  const to = new URL(`../dist/${folder}`, import.meta.url);
  rmSync(to, { recursive: true, force: true });
  cpSync(from, to, { recursive: true });
}
