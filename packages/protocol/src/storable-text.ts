const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * Text the service can store as given (see STORABLE_TEXT: its text columns refuse NUL and lone
 * UTF-16 surrogates, and the schemas cap lengths): NUL and lone surrogates become U+FFFD, and the
 * text is cut to `maxLength` UTF-16 units (never inside a surrogate pair). For text the service
 * takes from elsewhere (OpenTelemetry spans), where cleaning beats refusing.
 */
export function storableText(value: string, maxLength: number): string {
  let text = value;
  if (text.length > maxLength) {
    const last = text.charCodeAt(maxLength - 1);
    text = text.slice(0, last >= 0xd800 && last <= 0xdbff ? maxLength - 1 : maxLength);
  }
  if (text.includes('\u0000')) text = text.replaceAll('\u0000', '\uFFFD');
  LONE_SURROGATE.lastIndex = 0;
  if (LONE_SURROGATE.test(text)) {
    LONE_SURROGATE.lastIndex = 0;
    text = text.replace(LONE_SURROGATE, '\uFFFD');
  }
  return text;
}
