/**
 * Wraps an SDK client in Proxies that instrument a few of its methods and leave everything else
 * as it is: same prototype (`instanceof` holds), same properties, same functions (as Proxies of
 * the originals: `name`, `length`, `new` and static properties unchanged), and the same value for
 * the same property on every read. The original object is never changed.
 */

/** An instrumented method: called instead of `original`, with the caller's `this` and arguments. */
export type Instrumented = (
  original: CallableFunction,
  thisArg: unknown,
  args: unknown[],
) => unknown;

/** Where to instrument, from one object down. */
export interface ProxySpec {
  /** Properties whose (object) values are wrapped in turn. */
  readonly children?: Readonly<Record<string, ProxySpec>>;
  /** Methods replaced by an instrumented version. */
  readonly methods?: Readonly<Record<string, Instrumented>>;
  /**
   * Methods read through the Proxy and called on it run with the original object as `this`
   * (default): an SDK class with private fields (`#x`) throws when they are read on a Proxy, and
   * an instrumented method that calls another one on `this` is recorded once. `false` keeps the
   * Proxy as `this` for the methods not instrumented, for objects whose methods reach the client
   * through a property (Stainless resources' `this._client`), so that helpers built on an
   * instrumented method (`chat.completions.parse` → `create`) are recorded too, exactly once.
   * An instrumented method always runs on the original.
   */
  readonly bindToOriginal?: boolean;
  /** Properties holding the root object, answered with the root's Proxy (`_client`). */
  readonly rootKeys?: readonly string[];
}

interface Root {
  target: object;
  proxy: object;
}

/** The Proxy of `target` per `spec`. */
export function proxyTree<T extends object>(target: T, spec: ProxySpec): T {
  const root: Root = { target, proxy: target };
  root.proxy = proxyNode(target, spec, root);
  return root.proxy as T;
}

function proxyNode(target: object, spec: ProxySpec, root: Root): object {
  // What was handed out for a property, with the value it was made from (rebuilt if that changes).
  const handedOut = new Map<PropertyKey, { from: unknown; to: unknown }>();
  const bindToOriginal = spec.bindToOriginal !== false;
  const proxy: object = new Proxy(target, {
    get(original, key) {
      // Getters run on the original: they may read private fields.
      const value: unknown = Reflect.get(original, key, original);
      if (value === null || (typeof value !== 'object' && typeof value !== 'function'))
        return value;
      if (typeof key !== 'string' && bindToOriginal === false) return value;
      // The hot path (the SDK reads `this._client`, `create`… on every call): what was handed out.
      const known = handedOut.get(key);
      if (known !== undefined && known.from === value) return known.to;
      const descriptor = Reflect.getOwnPropertyDescriptor(original, key);
      // A Proxy must answer a frozen property with its very value.
      if (descriptor !== undefined && !descriptor.configurable && descriptor.writable === false)
        return value;
      const made = wrapValue(key, value as object, spec, root, proxy, original, bindToOriginal);
      // Kept when handed out as it is too (`_options`, `_tracer`…: read on every call), so that
      // the next read skips the descriptor and the spec.
      handedOut.set(key, { from: value, to: made });
      return made;
    },
  });
  return proxy;
}

function wrapValue(
  key: PropertyKey,
  value: object,
  spec: ProxySpec,
  root: Root,
  proxy: object,
  original: object,
  bindToOriginal: boolean,
): unknown {
  if (typeof key === 'string') {
    if (value === root.target && spec.rootKeys?.includes(key)) return root.proxy;
    const child = Object.hasOwn(spec.children ?? {}, key) ? spec.children?.[key] : undefined;
    if (child !== undefined) return proxyNode(value, child, root);
    const method = Object.hasOwn(spec.methods ?? {}, key) ? spec.methods?.[key] : undefined;
    if (method !== undefined && typeof value === 'function')
      return new Proxy(value, {
        // Called on the Proxy: the original as `this`, always (whatever `bindToOriginal` says of
        // the other methods), so that the method's own calls to other instrumented methods
        // (sendTransaction → this.sendRawTransaction) are not recorded a second time, and so
        // that what it reads of its object and the client (`this._client._options`, `post`…:
        // 18 reads per Anthropic call) skips the Proxy: traps are what a call pays most for.
        apply: (fn, thisArg, args) =>
          method(fn as CallableFunction, thisArg === proxy ? original : thisArg, args),
      });
  }
  if (typeof value === 'function' && bindToOriginal && key !== 'constructor')
    return new Proxy(value, {
      apply: (fn, thisArg, args) =>
        Reflect.apply(fn as CallableFunction, thisArg === proxy ? original : thisArg, args),
    });
  return value;
}
