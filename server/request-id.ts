// X-Request-Id: the client's when it is 1 to 128 visible ASCII characters, else one minted here
// (decisions, "Metadata envelope v1.1"). Minted ids are this process's random prefix and a
// counter: unique across nodes and restarts, and cheap on every request of a hot path.

import { randomBytes } from 'node:crypto';

const VISIBLE_ASCII = /^[\x21-\x7e]{1,128}$/;
const PREFIX = randomBytes(6).toString('hex');
let counter = 0;

export function requestIdOf(header: string): string {
  if (header !== '' && VISIBLE_ASCII.test(header)) return header;
  return `${PREFIX}-${(++counter).toString(36)}`;
}
