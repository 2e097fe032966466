import type { ComponentChildren } from 'preact';
import { onLinkClick } from '../router.js';

export function Link(props: { href: string; class?: string; children: ComponentChildren }) {
  return (
    <a href={props.href} class={props.class} onClick={(event) => onLinkClick(event, props.href)}>
      {props.children}
    </a>
  );
}
