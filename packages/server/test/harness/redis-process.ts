import { spawn, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { freePort } from './service-location.js';

/**
 * A Redis server of the test's own (the machine's `redis-server`, keeping nothing on disk, as
 * the development and CI Redis runs), so a test can kill it and start it again empty on the
 * same port: what a Redis restart does to the live bus, without touching the shared Redis.
 */
export class RedisProcess {
  private child: ChildProcess | undefined;

  private constructor(readonly port: number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  static async start(): Promise<RedisProcess> {
    const redis = new RedisProcess(await freePort());
    await redis.restart();
    return redis;
  }

  /** Starts it (again, empty) and resolves once it answers PING. */
  async restart(): Promise<void> {
    if (this.child) throw new Error('redis-server is running');
    const child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: 'ignore' },
    );
    this.child = child;
    child.on('exit', () => {
      if (this.child === child) this.child = undefined;
    });
    const deadline = Date.now() + 5_000;
    for (;;) {
      const probe = new Redis(this.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
      probe.on('error', () => {});
      try {
        await probe.connect();
        if ((await probe.ping()) === 'PONG') return;
      } catch (error) {
        if (Date.now() > deadline) throw error;
      } finally {
        probe.disconnect();
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** SIGKILL: its data is gone, as in a crash of a Redis that keeps nothing on disk. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
    this.child = undefined;
  }
}
