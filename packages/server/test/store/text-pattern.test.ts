import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeEngines, openTestStore, type TestStore } from '../harness/engines.js';
import { caseInsensitiveLiteral } from '../../src/store/text-pattern.js';

/*
 * The runs search matches `q` with `~*` and caseInsensitiveLiteral(q), not ILIKE (linear time):
 * it must find whatever ILIKE '%q%' finds, that is lower(text) containing lower(q), on this
 * engine's own case tables, and take every other character of q for itself.
 */
describeEngines('the runs search pattern [%s]', (engine) => {
  let t: TestStore;
  beforeAll(async () => {
    t = await openTestStore(engine);
  });
  afterAll(() => t?.dispose());

  /** For each [text, q]: whether the text matches q's pattern, and whether ILIKE says so. */
  async function check(pairs: [string, string][]): Promise<{ regex: boolean; ilike: boolean }[]> {
    return t.store.sql.query<{ regex: boolean; ilike: boolean }>(
      `SELECT u.x ~* u.p AS regex, lower(u.x) LIKE '%' || replace(replace(replace(lower(u.q),
         '\\', '\\\\'), '%', '\\%'), '_', '\\_') || '%' AS ilike
       FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS u(x, q, p, n)
       ORDER BY u.n`,
      [
        pairs.map(([x]) => x),
        pairs.map(([, q]) => q),
        pairs.map(([, q]) => caseInsensitiveLiteral(q)),
      ],
    );
  }

  it('finds every letter whose lower case ILIKE would take it to, in either direction', async () => {
    // every character the engine's lower() changes (one character to one), with its lower case
    const letters = await t.store.sql.query<{ upper: string; lower: string }>(
      `SELECT chr(cp) AS upper, lower(chr(cp)) AS lower FROM generate_series(32, 1114111) AS cp
       WHERE (cp < 55296 OR cp > 57343) AND lower(chr(cp)) <> chr(cp)
         AND length(lower(chr(cp))) = 1`,
    );
    expect(letters.length).toBeGreaterThan(1_000);
    const pairs: [string, string][] = letters.flatMap(({ upper, lower }) => [
      [`a${upper}b`, lower],
      [`a${lower}b`, upper],
      [`a${upper}b`, upper],
      [`a${lower}b`, lower],
    ]);
    const answers = await check(pairs);
    const missed = pairs.filter((_, i) => answers[i]?.ilike && !answers[i]?.regex);
    expect(missed.map(([x, q]) => `${JSON.stringify(q)} in ${JSON.stringify(x)}`)).toEqual([]);
  });

  it('finds a title-case letter by itself, which towlower and towupper both change', async () => {
    const answers = await check([
      ['ǅemal', 'ǅ'],
      ['ǅemal', 'ǆ'],
      ['ǅemal', 'Ǆ'],
      ['ǈubljana', 'ǈ'],
      ['ǋegoš', 'ǌ'],
      ['ǲ', 'ǲ'],
      ['İSTANBUL', 'istanbul'],
      ['İSTANBUL', 'İstanbul'],
      ['istanbul', 'İSTANBUL'],
      ['300 \u212a', '300 k'],
      ['GROẞE', 'große'],
    ]);
    expect(answers.map((a) => a.regex)).toEqual(answers.map(() => true));
  });

  it('takes every other character for itself, however a regular expression would read it', async () => {
    const literal = [
      '***=x',
      '(?i)a',
      '.*',
      '^a',
      'a$',
      'a{2}',
      '[ab]',
      '\\d',
      '\\',
      'a|b',
      '(x)',
      'a+b?',
      '\\1',
      '\t',
      '%_',
      'é è',
      '日本',
      '🙂',
    ];
    const answers = await check(
      literal.flatMap((q): [string, string][] => [
        [`<${q}>`, q],
        // the same characters, not in that order: a pattern that read q as an expression might
        ['xyz aab ab 1 d 2 i a', q],
      ]),
    );
    expect(answers.map((a) => a.regex)).toEqual(answers.map((a) => a.ilike));
    expect(answers.filter((_, i) => i % 2 === 0).every((a) => a.regex)).toBe(true);
  });
});
