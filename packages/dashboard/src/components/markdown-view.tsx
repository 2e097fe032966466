import MarkdownIt, { type Token } from 'markdown-it';
import { h, type ComponentChildren } from 'preact';

/*
 * The autopsy's Markdown, rendered without ever producing HTML text: markdown-it parses it (raw
 * HTML off, so `<img onerror>` stays the literal text it is) and the tokens become elements
 * here, from a fixed list of tags; text is only ever a text node. Links keep their href only
 * when it is http(s) and open with noopener; images show as their alt text (nothing is loaded
 * from another origin).
 */
const markdown = new MarkdownIt({ html: false, linkify: false, typographer: false });

const BLOCK_TAGS = new Set([
  'p',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'ul',
  'ol',
  'li',
  'blockquote',
  'table',
  'thead',
  'tbody',
  'tr',
  'th',
  'td',
]);
const INLINE_TAGS = new Set(['strong', 'em', 's']);

export function safeHref(href: string | null): string | undefined {
  if (!href) return undefined;
  try {
    const url = new URL(href, location.origin);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : undefined;
  } catch {
    return undefined;
  }
}

interface Frame {
  tag: string;
  props: Record<string, string>;
  children: ComponentChildren[];
}

function renderTokens(tokens: Token[]): ComponentChildren[] {
  const root: Frame = { tag: '', props: {}, children: [] };
  const stack: Frame[] = [root];
  const top = () => stack[stack.length - 1]!;
  for (const token of tokens) {
    if (token.nesting === 1) {
      const tag = token.type === 'link_open' ? 'a' : token.tag;
      const props: Record<string, string> = {};
      if (token.type === 'link_open') {
        const href = safeHref(String(token.attrGet('href') ?? ''));
        if (href)
          Object.assign(props, { href, rel: 'noopener noreferrer nofollow', target: '_blank' });
      }
      stack.push({ tag, props, children: [] });
      continue;
    }
    if (token.nesting === -1) {
      const frame = stack.pop()!;
      const allowed = BLOCK_TAGS.has(frame.tag) || INLINE_TAGS.has(frame.tag) || frame.tag === 'a';
      const node: ComponentChildren = allowed
        ? h(
            frame.tag === 'a' && !frame.props.href ? 'span' : frame.tag,
            frame.props,
            ...frame.children,
          )
        : frame.children;
      top().children.push(node);
      continue;
    }
    switch (token.type) {
      case 'inline':
        top().children.push(...renderTokens(token.children ?? []));
        break;
      case 'text':
      case 'html_inline':
      case 'html_block':
        top().children.push(token.content);
        break;
      case 'code_inline':
        top().children.push(h('code', null, token.content));
        break;
      case 'code_block':
      case 'fence':
        top().children.push(h('pre', null, h('code', null, token.content)));
        break;
      case 'softbreak':
        top().children.push('\n');
        break;
      case 'hardbreak':
        top().children.push(h('br', null));
        break;
      case 'hr':
        top().children.push(h('hr', null));
        break;
      case 'image':
        top().children.push(token.content);
        break;
      default:
        if (token.content) top().children.push(token.content);
    }
  }
  return root.children;
}

export function MarkdownView(props: { source: string }) {
  return <div class="markdown">{renderTokens(markdown.parse(props.source, {}))}</div>;
}
