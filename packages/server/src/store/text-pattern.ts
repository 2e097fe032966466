/**
 * The runs search's `q` as a regular expression (PostgreSQL's ARE) for the case-insensitive
 * operator `~*`: it finds every text that `ILIKE '%q%'` finds (both sides through `lower()`),
 * in time linear in the text, where ILIKE's matcher backtracks (see trace-store.ts).
 *
 * `~*` matches each letter of the pattern as its lower and upper case (towlower, towupper),
 * which is not quite what `lower()` on both sides does. Where they part (the engines'
 * C.UTF-8 case tables, checked by a test over every code point), the letter becomes a bracket
 * of every letter `lower()` takes to the same one: a search for "istanbul" finds "İSTANBUL", one
 * for "ǅ" finds "ǅ" (towlower and towupper both leave that title-case letter), one for "k" the
 * Kelvin sign. Everything else is escaped to stand for itself: ASCII punctuation with a
 * backslash; other characters mean nothing special in a pattern, and a backslash before a
 * letter outside ASCII would be an error.
 */
export function caseInsensitiveLiteral(text: string): string {
  let pattern = '';
  for (const char of text) {
    const family = BRACKET_OF.get(char);
    if (family) pattern += family;
    else if (char < '\x80' && !/[A-Za-z0-9]/.test(char)) pattern += `\\${char}`;
    else pattern += char;
  }
  return pattern;
}

/**
 * Letters that `lower()` takes to one letter but `~*` does not match with each other, or (the
 * title-case ones) not even with themselves: for a letter, `~*` matches its towlower and
 * towupper, and a title-case letter is neither.
 */
const FAMILIES = [
  ['i', 'I', '\u0130'], // Latin capital I with dot above
  ['\u01c4', '\u01c5', '\u01c6'], // DŽ, title-case Dž, dž
  ['\u01c7', '\u01c8', '\u01c9'], // LJ, Lj, lj
  ['\u01ca', '\u01cb', '\u01cc'], // NJ, Nj, nj
  ['\u01f1', '\u01f2', '\u01f3'], // DZ, Dz, dz
  ['\u03b8', '\u0398', '\u03f4'], // theta, Theta, capital theta symbol
  ['\u03c9', '\u03a9', '\u2126'], // omega, Omega, Ohm sign
  ['k', 'K', '\u212a'], // Kelvin sign
  ['\u00e5', '\u00c5', '\u212b'], // a with ring, A with ring, Angstrom sign
  ['\u00df', '\u1e9e'], // sharp s, capital sharp s
];

/**
 * Each family's letters as a bracket of one-letter ranges: `~*` adds the cases of each letter
 * of a bracket (towlower, towupper), leaving out a title-case letter itself, but keeps every
 * letter of a range.
 */
const BRACKET_OF = new Map(
  FAMILIES.flatMap((family) => {
    const bracket = `[${family.map((letter) => `${letter}-${letter}`).join('')}]`;
    return family.map((letter) => [letter, bracket] as const);
  }),
);
