// A TCP relay that can be cut and restored: a dependency (PostgreSQL, S3) that goes away under a
// running node and comes back (test/pg-outage.test.ts, test/catalog-rebuild.test.ts).
import net from 'node:net';

/** What the relay does to the next client bytes that carry a pattern (`Relay.arm`). */
type Action = { cut: true } | { delayMs: number };

/**
 * A TCP relay to `target` on a port of its own; `cut` resets every connection and refuses new ones
 * until `restore`. `arm` acts on one message the client sends: a PostgreSQL statement whose bound
 * parameters carry a pattern (test/multi-node-idempotency.test.ts). `pause` stops forwarding in
 * both directions without closing anything (a paused server, a network that drops packets) until
 * `resume`.
 */
export class Relay {
  private server?: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private armed?: { pattern: Buffer; action: Action; done: () => void };
  private readonly pairs = new Set<[net.Socket, net.Socket]>();
  private paused = false;
  port = 0;

  /**
   * The next client bytes that carry `pattern` (within one connection's stream): `cut` sends them
   * on, ends the upstream side after them (the server reads and runs them) and drops the client's
   * side at once, so the client never hears the reply; `delayMs` holds them (and that connection)
   * that long. Resolves once the bytes are seen (the hold begins, or the cut is made).
   */
  arm(pattern: string, action: Action): Promise<void> {
    return new Promise((resolve) => {
      this.armed = { pattern: Buffer.from(pattern), action, done: resolve };
    });
  }

  constructor(private readonly target: { host: string; port: number }) {}

  async open(): Promise<void> {
    this.server = net.createServer((client) => {
      const upstream = net.connect(this.target.port, this.target.host);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      const pair: [net.Socket, net.Socket] = [client, upstream];
      this.pairs.add(pair);
      client.on('close', () => this.pairs.delete(pair));
      if (this.paused) {
        client.pause();
        upstream.pause();
      } else upstream.pipe(client);
      client.on('end', () => upstream.end());
      let tail: Buffer = Buffer.alloc(0);
      client.on('data', (chunk: Buffer) => {
        const armed = this.armed;
        const seen = armed ? Buffer.concat([tail, chunk]) : chunk;
        if (armed) tail = seen.subarray(Math.max(0, seen.length - armed.pattern.length));
        if (!armed || !seen.includes(armed.pattern)) {
          if (!upstream.write(chunk)) {
            client.pause();
            upstream.once('drain', () => {
              if (!this.paused) client.resume();
            });
          }
          return;
        }
        this.armed = undefined;
        if ('cut' in armed.action) {
          // The server gets the bytes and an orderly end (it runs them); its reply goes nowhere.
          upstream.unpipe(client);
          upstream.removeAllListeners('error');
          upstream.on('error', () => {});
          upstream.on('data', () => {});
          client.removeAllListeners('error');
          client.on('error', () => {});
          upstream.end(chunk);
          client.destroy();
          armed.done();
          return;
        }
        client.pause();
        armed.done();
        setTimeout(() => {
          upstream.write(chunk);
          client.resume();
        }, armed.action.delayMs);
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  async cut(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server!.close(() => resolve()));
    for (const s of this.sockets) s.resetAndDestroy();
    await closed;
  }

  restore(): Promise<void> {
    return this.open();
  }

  /** Nothing is forwarded any more, either way; connections stay open and new ones are accepted. */
  pause(): void {
    this.paused = true;
    for (const [client, upstream] of this.pairs) {
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
    }
  }

  resume(): void {
    this.paused = false;
    for (const [client, upstream] of this.pairs) {
      upstream.pipe(client);
      client.resume();
    }
  }
}
