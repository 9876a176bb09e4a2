// A TCP relay that can be cut and restored: a dependency (PostgreSQL, S3) that goes away under a
// running node and comes back (test/pg-outage.test.ts, test/catalog-rebuild.test.ts).
import net from 'node:net';

/** A TCP relay to `target` on a port of its own; `cut` resets every connection and refuses new ones until `restore`. */
export class Relay {
  private server?: net.Server;
  private readonly sockets = new Set<net.Socket>();
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
      client.pipe(upstream);
      upstream.pipe(client);
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
}
