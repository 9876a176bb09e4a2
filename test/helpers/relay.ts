// A TCP relay that can be cut and restored: a dependency (PostgreSQL, S3) that goes away under a
// running node and comes back (test/pg-outage.test.ts, test/catalog-rebuild.test.ts).
import net from 'node:net';

/**
 * A TCP relay to `target` on a port of its own; `cut` resets every connection and refuses new ones
 * until `restore`; `pause` stops forwarding in both directions without closing anything (a
 * paused server, a network that drops packets) until `resume`.
 */
export class Relay {
  private server?: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private readonly pairs = new Set<[net.Socket, net.Socket]>();
  private paused = false;
  port = 0;

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
      if (!this.paused) this.forward(pair);
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
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
    }
  }

  resume(): void {
    this.paused = false;
    for (const pair of this.pairs) this.forward(pair);
  }

  private forward([client, upstream]: [net.Socket, net.Socket]): void {
    client.pipe(upstream);
    upstream.pipe(client);
  }
}
