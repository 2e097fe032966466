import { describe, expect, it } from 'vitest';
import { KeyGuessLimiter, addressBucket } from '../../src/auth/key-guess-limiter.js';

/** A limiter on a clock the test moves by hand. */
function limiterAt(options: { maxFailures?: number; windowMs?: number; maxAddresses?: number }) {
  const clock = { now: 1_000 };
  const limiter = new KeyGuessLimiter({
    maxFailures: options.maxFailures ?? 3,
    windowMs: options.windowMs ?? 60_000,
    maxAddresses: options.maxAddresses ?? 100,
    now: () => clock.now,
  });
  return { limiter, clock };
}

describe('KeyGuessLimiter', () => {
  it('refuses an address once it reached its failures, until the window that began at its first failure ends', () => {
    const { limiter, clock } = limiterAt({ maxFailures: 3, windowMs: 60_000 });
    limiter.recordFailure('192.0.2.1');
    clock.now += 10_000;
    limiter.recordFailure('192.0.2.1');
    expect(limiter.retryAfterSeconds('192.0.2.1')).toBe(0);
    limiter.recordFailure('192.0.2.1');
    // the window began 10 s ago: 50 s to go
    expect(limiter.retryAfterSeconds('192.0.2.1')).toBe(50);
    clock.now += 49_500;
    expect(limiter.retryAfterSeconds('192.0.2.1')).toBe(1); // rounded up, never 0 while refused
    clock.now += 500;
    expect(limiter.retryAfterSeconds('192.0.2.1')).toBe(0);
    // a fresh window: one failure is one failure again
    limiter.recordFailure('192.0.2.1');
    expect(limiter.retryAfterSeconds('192.0.2.1')).toBe(0);
  });

  it('counts each address on its own', () => {
    const { limiter } = limiterAt({ maxFailures: 2 });
    limiter.recordFailure('192.0.2.1');
    limiter.recordFailure('192.0.2.1');
    expect(limiter.retryAfterSeconds('192.0.2.1')).toBeGreaterThan(0);
    expect(limiter.retryAfterSeconds('192.0.2.2')).toBe(0);
  });

  it('takes back a failure counted ahead of a lookup that found the key valid', () => {
    const { limiter } = limiterAt({ maxFailures: 2 });
    limiter.recordFailure('192.0.2.1');
    limiter.recordFailure('192.0.2.1');
    expect(limiter.retryAfterSeconds('192.0.2.1')).toBeGreaterThan(0);
    limiter.withdrawFailure('192.0.2.1');
    expect(limiter.retryAfterSeconds('192.0.2.1')).toBe(0);
    limiter.withdrawFailure('192.0.2.1');
    expect(limiter.size).toBe(0); // nothing left to remember
    limiter.withdrawFailure('192.0.2.9'); // an address it never saw: nothing happens
    expect(limiter.size).toBe(0);
  });

  it('is bounded: past maxAddresses the window that opened first goes', () => {
    const { limiter, clock } = limiterAt({ maxFailures: 1, maxAddresses: 3 });
    for (const address of ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4']) {
      limiter.recordFailure(address);
      clock.now += 1;
    }
    expect(limiter.size).toBe(3);
    expect(limiter.retryAfterSeconds('10.0.0.1')).toBe(0); // evicted
    for (const address of ['10.0.0.2', '10.0.0.3', '10.0.0.4'])
      expect(limiter.retryAfterSeconds(address)).toBeGreaterThan(0);
  });

  it('sweeps expired windows without timers, when a new address comes', () => {
    const { limiter, clock } = limiterAt({ maxFailures: 5, windowMs: 1_000 });
    for (let i = 0; i < 50; i++) limiter.recordFailure(`10.0.1.${i}`);
    expect(limiter.size).toBe(50);
    clock.now += 1_000;
    limiter.recordFailure('10.0.2.1');
    expect(limiter.size).toBe(1);
  });

  it('counts IPv6 addresses per /64 and IPv4-mapped IPv6 addresses as their IPv4', () => {
    const { limiter } = limiterAt({ maxFailures: 2 });
    limiter.recordFailure('2001:db8:1:2::1');
    limiter.recordFailure('2001:0db8:0001:0002:ffff:ffff:ffff:fffe');
    expect(limiter.retryAfterSeconds('2001:db8:1:2::99')).toBeGreaterThan(0);
    expect(limiter.retryAfterSeconds('2001:db8:1:3::1')).toBe(0);
    limiter.recordFailure('::ffff:198.51.100.7');
    limiter.recordFailure('198.51.100.7');
    expect(limiter.retryAfterSeconds('198.51.100.7')).toBeGreaterThan(0);
  });
});

describe('addressBucket', () => {
  it.each([
    ['192.0.2.1', '192.0.2.1'],
    ['::ffff:192.0.2.1', '192.0.2.1'],
    ['::FFFF:192.0.2.1', '192.0.2.1'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['2001:DB8:0:0:1::', '2001:db8:0:0::/64'],
    ['2001:db8:a:b:c:d:e:f', '2001:db8:a:b::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['64:ff9b::192.0.2.1', '64:ff9b:0:0::/64'],
    ['1::2::3', '1::2::3'], // not an address: counted as given
  ])('%s counts as %s', (address, bucket) => {
    expect(addressBucket(address)).toBe(bucket);
  });
});
