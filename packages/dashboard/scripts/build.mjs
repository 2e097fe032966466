// Builds the dashboard to dist/: one ES module bundle, one stylesheet, the page. Everything the
// page loads comes from the server that serves it (no CDN, no other origin, works offline).
import { build } from 'esbuild';
import { copyFile, mkdir, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = `${root}dist`;

await rm(dist, { recursive: true, force: true });
await mkdir(dist, { recursive: true });
await build({
  entryPoints: { app: `${root}src/main.tsx` },
  bundle: true,
  format: 'esm',
  target: 'es2022',
  minify: true,
  sourcemap: true,
  jsx: 'automatic',
  jsxImportSource: 'preact',
  outdir: dist,
  logLevel: 'warning',
  legalComments: 'none',
});
await copyFile(`${root}src/index.html`, `${dist}/index.html`);
await copyFile(`${root}src/styles.css`, `${dist}/app.css`);
// uPlot's own stylesheet (its tooltip and axis layout), served from here like the rest
const require = createRequire(import.meta.url);
await copyFile(require.resolve('uplot/dist/uPlot.min.css'), `${dist}/uplot.css`);
