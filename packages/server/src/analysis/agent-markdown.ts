/*
 * Agent text inside Markdown: the one place where text that came from an agent (or from a model
 * that read it) is made safe to put into an autopsy. Whatever the agent sent, it shows as its own
 * characters: no raw HTML, no link or image, no heading, list, quote or table of its own, and no
 * line break that ends the autopsy's quote or table row early.
 */

/**
 * Every line break a Markdown engine or a browser may honour: CommonMark's \r\n, \r and \n, plus
 * U+2028/U+2029, NEL (U+0085), vertical tab and form feed.
 */
const LINE_BREAK = /\r\n|[\n\v\f\r\u0085\u2028\u2029]/g;
/** Other control characters (tab included): shown as a space, never as themselves. */
const CONTROL = /\p{Cc}/gu;
/**
 * What would start a link, an autolink or a linkified URL, domain or e-mail address (GFM, or
 * linkify's fuzzy rules, `evil.com` and `пример.рф` too): `[`, `]`, `<`, `@`, `:` or `/` before `/`,
 * and `.` unless a space or a digit follows (a top-level domain starts with neither).
 */
const LINKING = String.raw`[[\]<@]|[:/](?=\/)|\.(?=[^\s\d])`;
/**
 * Inline agent text: the linking characters, and whatever else has meaning inside a line
 * (backslash, code, emphasis, strike-through, HTML and entities, table pipes).
 */
const INLINE_SPECIAL = new RegExp(String.raw`[\\\`*_>!&|~#]|${LINKING}`, 'g');
/** What may start a block at the beginning of a line: a heading, quote, list or setext line. */
const BLOCK_START = /^(?:[=-]|\+(?=\s|$)|\d{1,9}[.)](?=\s|$))/;
/** The model's answer keeps its Markdown: only backslashes, HTML and links are escaped. */
const MODEL_SPECIAL = new RegExp(String.raw`\\|${LINKING}`, 'g');

/** How a piece of agent text appears. */
export type AgentTextForm =
  /**
   * Prose inside a line of the autopsy, on one line: every character that means something in
   * Markdown (or to a linkifier) is backslash-escaped, so it renders as exactly the agent's text.
   */
  | 'inline'
  /** A code span (names, labels): a fence longer than any backtick run inside. */
  | 'code'
  /**
   * A code span inside a GFM table cell, where a pipe ends the cell even inside code unless
   * escaped (and `\|` shows as `|` there).
   */
  | 'code-cell'
  /** A block quote of several lines; each line is escaped as `inline`. */
  | 'quote'
  /**
   * A model's answer written from agent data: its Markdown structure is kept (headings, lists,
   * tables, emphasis, code are the point of it), but backslashes and LINKING characters are
   * escaped everywhere, so that no raw HTML, link, image, autolink or bare URL/domain/e-mail (GFM
   * or linkify) survives; line breaks of every form become `\n`. Inside code these show their backslash: the price of never
   * parsing the answer.
   */
  | 'model'
  /**
   * A model's prose placed between computed sections: as `model`, and besides no heading of its
   * own (ATX `#` markers and setext underlines are escaped, inside lists and quotes too), so
   * that the autopsy's headings, its verdict first, are only ever the computed ones.
   */
  | 'prose';

/**
 * A line that cannot be a heading or a setext underline: a backslash before its `#` marker or
 * its run of `=`/`-`, after any indentation, quote and list markers (scanned, not matched by a
 * regular expression: a model's line may be long, and nested quantifiers would backtrack).
 */
function noHeading(line: string): string {
  const escapeAt = (i: number) => `${line.slice(0, i)}\\${line.slice(i)}`;
  let i = 0;
  for (;;) {
    while (line[i] === ' ' || line[i] === '\t') i++;
    // a lone `-` is an underline before it is an empty list item
    if (SETEXT_UNDERLINE.test(line.slice(i))) return escapeAt(i);
    const c = line[i];
    if (c === '>') {
      i++;
      continue;
    }
    let marker = 0;
    if (c === '-' || c === '*' || c === '+') marker = 1;
    else {
      while (marker < 9 && line[i + marker]! >= '0' && line[i + marker]! <= '9') marker++;
      if (marker > 0 && (line[i + marker] === '.' || line[i + marker] === ')')) marker++;
      else marker = 0;
    }
    const after = line[i + marker];
    if (marker > 0 && (after === undefined || after === ' ' || after === '\t')) {
      i += marker;
      continue;
    }
    break;
  }
  return ATX_HEADING.test(line.slice(i)) ? escapeAt(i) : line;
}

const SETEXT_UNDERLINE = /^(?:=+|-+)[ \t]*$/;
const ATX_HEADING = /^#{1,6}(?:[ \t]|$)/;

function shorten(text: string, max: number): string {
  if (text.length <= max) return text;
  let cut = text.slice(0, max - 1);
  // never leave half of a surrogate pair
  if (/[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1);
  return `${cut}…`;
}

const oneLine = (text: string) =>
  text.replace(LINE_BREAK, ' ').replace(CONTROL, ' ').replace(/\s+/g, ' ').trim();

const backslash = (c: string) => `\\${c}`;

/** Backslash escapes work on ASCII punctuation, and on nothing else (CommonMark). */
const escapeLine = (text: string) =>
  text
    .replace(INLINE_SPECIAL, backslash)
    .replace(BLOCK_START, (start) => `${start.slice(0, -1)}\\${start.slice(-1)}`);

function codeSpan(text: string): string {
  const runs = text.match(/`+/g) ?? [];
  const fence = '`'.repeat(Math.max(0, ...runs.map((r) => r.length)) + 1);
  // a space on each side keeps a backtick at either end from joining the fence (and is stripped)
  const pad = text.startsWith('`') || text.endsWith('`') ? ' ' : '';
  return `${fence}${pad}${text}${pad}${fence}`;
}

/**
 * Agent text as Markdown that shows exactly that text (shortened to `max` characters, line
 * breaks shown as spaces, or as quote lines in the `quote` form).
 */
export function agentMarkdown(text: string, form: AgentTextForm, max: number): string {
  const short = shorten(text, max);
  switch (form) {
    case 'quote':
      return short
        .split(LINE_BREAK)
        .map((line) => {
          const escaped = escapeLine(oneLine(line));
          return escaped === '' ? '>' : `> ${escaped}`;
        })
        .join('\n');
    case 'code':
    case 'code-cell': {
      const line = oneLine(short);
      const span = line === '' ? '` `' : codeSpan(line);
      return form === 'code' ? span : span.replaceAll('|', '\\|');
    }
    case 'model':
      return short
        .replace(LINE_BREAK, '\n')
        .replace(/(?![\t\n])\p{Cc}/gu, ' ')
        .replace(MODEL_SPECIAL, backslash);
    case 'prose':
      return agentMarkdown(short, 'model', max).split('\n').map(noHeading).join('\n');
    case 'inline':
      return escapeLine(oneLine(short));
  }
}
