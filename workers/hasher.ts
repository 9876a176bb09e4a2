// The whole-object hashing thread (engine/cas/whole-hasher.ts): one SHA-256 per upload, in order.
import { createHash, type Hash } from 'node:crypto';
import { parentPort } from 'node:worker_threads';

type Message =
  | { op: 'open' | 'digest' | 'discard'; id: number }
  | { op: 'update'; id: number; segment: SharedArrayBuffer; offset: number; length: number };

const hashes = new Map<number, { hash: Hash; bytes: number }>();

parentPort!.on('message', (m: Message) => {
  switch (m.op) {
    case 'open':
      hashes.set(m.id, { hash: createHash('sha256'), bytes: 0 });
      break;
    case 'update': {
      const h = hashes.get(m.id);
      if (!h) return;
      h.hash.update(new Uint8Array(m.segment, m.offset, m.length));
      h.bytes += m.length;
      parentPort!.postMessage({ id: m.id, hashed: h.bytes });
      break;
    }
    case 'digest': {
      const h = hashes.get(m.id);
      hashes.delete(m.id);
      parentPort!.postMessage({ id: m.id, digest: h ? h.hash.digest('hex') : '' });
      break;
    }
    case 'discard':
      hashes.delete(m.id);
      break;
  }
});
