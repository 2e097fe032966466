// The labelled set of the analysis tests (packages/server/test/analysis/labelled-runs/, TypeScript)
// for the benchmarks and scripts, which run on plain Node: bundled once with esbuild (the
// dashboard's bundler) into node_modules/.cache, its packages left as imports, then imported.
// Also a local stand-in for a chat-completions endpoint that answers what it is told to, and
// the recorded answers the LLM analyzer is scored with.

import { createServer } from 'node:http';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SET_DIR = join(ROOT, 'packages/server/test/analysis/labelled-runs');
export const RECORDED_ANSWERS_FILE = join(SET_DIR, 'recorded-answers.json');

/** The labelled set module: LABELLED_RUNS, scoreAutopsy, describeMisses, … */
export async function loadLabelledSet() {
  const outDir = join(ROOT, 'node_modules/.cache/flightlog-bench');
  mkdirSync(outDir, { recursive: true });
  const outfile = join(outDir, `labelled-runs-${process.pid}.mjs`);
  await build({
    entryPoints: [join(SET_DIR, 'index.ts')],
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    outfile,
    logLevel: 'warning',
  });
  try {
    return await import(pathToFileURL(outfile).href);
  } finally {
    rmSync(outfile, { force: true });
  }
}

/** The recorded model answers, by case id. */
export function recordedAnswers() {
  return JSON.parse(readFileSync(RECORDED_ANSWERS_FILE, 'utf8')).answers;
}

/** A chat-completions endpoint on 127.0.0.1 answering `answer()` to every request. */
export async function startAnsweringEndpoint(answer) {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'chatcmpl-bench',
          object: 'chat.completion',
          choices: [
            { index: 0, message: { role: 'assistant', content: answer() }, finish_reason: 'stop' },
          ],
        }),
      );
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${server.address().port}/v1`,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
