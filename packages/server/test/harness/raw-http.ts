import net from 'node:net';

/** One HTTP response as read off a raw socket. */
export interface RawAnswer {
  status: number;
  /** Header names in lower case. */
  headers: Record<string, string>;
  body: string;
}

/** What came back on a raw socket: the first answer (spread), every answer, and timings. */
export interface RawExchange extends RawAnswer {
  /** Every answer on the connection, in order (several when bytes were left for a next request). */
  answers: RawAnswer[];
  /** When the connection closed, in ms after connecting (at the deadline when `timedOut`). */
  closedAfterMs: number;
  /** When the first byte of an answer arrived, in ms after connecting; undefined if none did. */
  answeredAfterMs: number | undefined;
  /**
   * Bytes of the request handed to the socket before the first byte of an answer arrived:
   * an upper bound on what the server can have read before it answered (writes wait for
   * `drain`, so at most one socket buffer more than the kernel took).
   */
  sentBeforeAnswer: number;
  /** Bytes of the request handed to the socket in all. */
  sent: number;
  /** The server neither closed the connection nor stopped answering by the deadline. */
  timedOut: boolean;
}

export interface RawOptions {
  /** Stop writing once an answer starts to arrive. Default true. */
  stopOnAnswer?: boolean;
  /** Half-close the connection (FIN) after the last chunk. Default false. */
  endAfterWrite?: boolean;
  /** The client's own deadline: hang up after this long, in ms. Default 30 s. */
  deadlineMs?: number;
}

/** Splits the bytes read off a connection into HTTP responses (by Content-Length). */
function parseAnswers(received: Buffer): RawAnswer[] {
  const answers: RawAnswer[] = [];
  let rest = received;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) break;
    const [statusLine = '', ...headerLines] = rest
      .subarray(0, end)
      .toString('latin1')
      .split('\r\n');
    const headers = Object.fromEntries(
      headerLines.map((line) => {
        const colon = line.indexOf(':');
        return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()];
      }),
    );
    const length = headers['content-length'];
    const bodyEnd = length === undefined ? rest.length : end + 4 + Number(length);
    answers.push({
      status: Number(statusLine.split(' ')[1]),
      headers,
      body: rest.subarray(end + 4, bodyEnd).toString('utf8'),
    });
    rest = rest.subarray(bodyEnd);
  }
  return answers;
}

/**
 * Speaks HTTP by hand: writes `chunks` one after another, `gapMs` apart (a slow sender), and
 * reads until the server closes the connection or the client's deadline passes.
 */
export async function rawExchange(
  url: string,
  chunks: (string | Buffer)[],
  gapMs = 0,
  options: RawOptions = {},
): Promise<RawExchange> {
  const { stopOnAnswer = true, endAfterWrite = false, deadlineMs = 30_000 } = options;
  const { port } = new URL(url);
  const socket = net.connect(Number(port), '127.0.0.1');
  socket.on('error', () => {});
  await new Promise((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const started = Date.now();
  const received: Buffer[] = [];
  let answeredAt: number | undefined;
  let sent = 0;
  let sentBeforeAnswer = 0;
  socket.on('data', (data: Buffer) => {
    answeredAt ??= Date.now();
    received.push(data);
  });
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));
  let timedOut = false;
  const deadline = setTimeout(() => {
    timedOut = true;
    socket.destroy();
  }, deadlineMs);
  void (async () => {
    for (const chunk of chunks) {
      if (socket.destroyed || !socket.writable) return;
      if (stopOnAnswer && answeredAt !== undefined) return;
      const drained = socket.write(chunk);
      sent += chunk.length;
      if (answeredAt === undefined) sentBeforeAnswer = sent;
      if (!drained)
        await new Promise((resolve) => {
          socket.once('drain', resolve);
          socket.once('close', resolve);
        });
      if (gapMs > 0) await new Promise((resolve) => setTimeout(resolve, gapMs));
    }
    if (endAfterWrite && !socket.destroyed) socket.end();
  })();
  const closedAt = await closed;
  clearTimeout(deadline);
  const answers = parseAnswers(Buffer.concat(received));
  const first = answers[0] ?? { status: 0, headers: {}, body: '' };
  return {
    ...first,
    answers,
    closedAfterMs: closedAt - started,
    answeredAfterMs: answeredAt === undefined ? undefined : answeredAt - started,
    sentBeforeAnswer,
    sent,
    timedOut,
  };
}
