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

/**
 * The labelled set module, typed from its TypeScript source (what the bundle is built from).
 * @typedef {typeof import('../packages/server/test/analysis/labelled-runs/index.js')} LabelledSet
 */

/**
 * @typedef {import('../packages/server/test/analysis/labelled-runs/index.js').CaseScore}
 *   CaseScore
 */

/**
 * The labelled set module: LABELLED_RUNS, scoreAutopsy, describeMisses, …
 * @returns {Promise<LabelledSet>}
 */
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
    return /** @type {LabelledSet} */ (await import(pathToFileURL(outfile).href));
  } finally {
    rmSync(outfile, { force: true });
  }
}

/**
 * RECORDED_ANSWERS_FILE: the answers (each ending in a newline) by case id, and what recorded them.
 * @typedef {{ about: string, recordedWith: string, answers: Record<string, string> }}
 *   RecordedAnswers
 */

/**
 * The recorded model answers, by case id.
 * @returns {RecordedAnswers['answers']}
 */
export function recordedAnswers() {
  return /** @type {RecordedAnswers} */ (JSON.parse(readFileSync(RECORDED_ANSWERS_FILE, 'utf8')))
    .answers;
}

/** @typedef {import('node:net').AddressInfo} AddressInfo */

/**
 * A chat-completions endpoint on 127.0.0.1 answering `answer()` to every request. `close`
 * resolves with the error of server.close, if any.
 * @param {() => string} answer
 * @returns {Promise<{ baseUrl: string, close: () => Promise<Error | undefined> }>}
 */
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
  await /** @type {Promise<void>} */ (
    new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  );
  return {
    baseUrl: `http://127.0.0.1:${/** @type {AddressInfo} */ (server.address()).port}/v1`,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
