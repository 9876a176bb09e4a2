// The cursors of every paged list and of search (decisions §5, "Tenants cannot harm each other"):
// opaque and authenticated. A cursor is the list's position (a document id, a key, an index)
// sealed with AES-256-GCM under the cluster's cursor key; the additional data binds it to the
// list, to the query (the list's parameters other than cursor and limit, normalized by the list)
// and to the principal (tenant and subject). So a cursor names no document in clear, and one that
// was altered, forged, or made for another caller or another query does not open: 400
// invalid_cursor. The key is made once and kept where every node reads it (the catalog's units
// on fs and pg-s3, the bucket on s3), so a cursor opens on any node and after a restart.
//
// A token is base64url (no padding) of: version (1 byte) | IV (12) | ciphertext | tag (16).
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { CURSOR_MAX_CHARS } from '../base/limits.js';
import { type SvcError, invalidCursor } from '../base/errors.js';
import { DEFAULT_TENANT, type DevSecretStore } from '../store/index.js';

const VERSION = 1;
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** Whose cursors: a verified token's tenant and subject. */
export interface CursorOwner {
  readonly tenant: string;
  readonly subject: string;
}

/** The caller of the blob API with security off (no token): the default tenant's one anonymous principal. */
export const ANONYMOUS: CursorOwner = { tenant: DEFAULT_TENANT, subject: '' };

/** How a list refuses a token that is not even shaped like a cursor (default: invalid_cursor, as any other). */
export interface CursorRefusals {
  malformed?: (message: string) => SvcError;
}

/** One list's cursors for one caller: the query (normalized, JSON) is bound per call. */
export interface ListCursors {
  /** The opaque cursor of `position` for this list, caller and query. */
  seal(query: unknown, position: string): string;
  /** The position `token` seals, if this list gave it to this caller for this query; else 400. Absent: absent. */
  open(query: unknown, token: string | undefined): string | undefined;
}

export class CursorSeal {
  private key?: Buffer;

  constructor(private readonly keys: DevSecretStore) {}

  /** Reads the cluster's cursor key, made now if there is none yet (concurrent nodes all keep the first). */
  async load(): Promise<{ created: boolean; location: string }> {
    const { secret, created } = await this.keys.keep(randomBytes(KEY_BYTES).toString('base64url'));
    const key = Buffer.from(secret, 'base64url');
    if (key.length !== KEY_BYTES) throw new Error(`the cursor key kept in ${this.keys.location} is not ${KEY_BYTES} bytes`);
    this.key = key;
    return { created, location: this.keys.location };
  }

  /** The cursors of `list` (a name of its own: 'search', 'documents', ...) for `owner` (undefined: ANONYMOUS). */
  of(list: string, owner: CursorOwner | undefined, refusals: CursorRefusals = {}): ListCursors {
    const who = owner ?? ANONYMOUS;
    return {
      seal: (query, position) => this.seal(list, who, query, position),
      open: (query, token) => (token === undefined ? undefined : this.open(list, who, query, token, refusals)),
    };
  }

  private seal(list: string, owner: CursorOwner, query: unknown, position: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.loaded(), iv);
    cipher.setAAD(boundTo(list, owner, query));
    const sealed = Buffer.concat([Buffer.of(VERSION), iv, cipher.update(position, 'utf8'), cipher.final(), cipher.getAuthTag()]).toString('base64url');
    if (sealed.length > CURSOR_MAX_CHARS) throw new Error(`a cursor of ${list} would be ${sealed.length} characters`);
    return sealed;
  }

  private open(list: string, owner: CursorOwner, query: unknown, token: string, refusals: CursorRefusals): string {
    const malformed = refusals.malformed ?? invalidCursor;
    if (typeof token !== 'string' || token.length === 0 || token.length > CURSOR_MAX_CHARS || !BASE64URL.test(token)) {
      throw malformed(`cursor must be 1..${CURSOR_MAX_CHARS} characters of base64url, a nextCursor passed back unchanged`);
    }
    const bytes = Buffer.from(token, 'base64url');
    if (bytes.length < 1 + IV_BYTES + TAG_BYTES) throw malformed('cursor is not a token issued by this endpoint');
    // Shaped like a cursor but not one of this version, or not in its one encoding (base64url's
    // ignored trailing bits changed): altered, as a cursor whose tag does not verify.
    if (bytes[0] !== VERSION || bytes.toString('base64url') !== token) throw invalidCursor();
    const decipher = createDecipheriv('aes-256-gcm', this.loaded(), bytes.subarray(1, 1 + IV_BYTES));
    decipher.setAAD(boundTo(list, owner, query));
    decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(bytes.subarray(1 + IV_BYTES, bytes.length - TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      throw invalidCursor();
    }
  }

  private loaded(): Buffer {
    if (!this.key) throw new Error('the cursor key is not loaded (CursorSeal.load)');
    return this.key;
  }
}

/** The additional data a cursor is sealed with: what it belongs to. */
function boundTo(list: string, owner: CursorOwner, query: unknown): Buffer {
  return Buffer.from(JSON.stringify(['svc-cursor', VERSION, list, owner.tenant, owner.subject, query ?? null]), 'utf8');
}
