// The S3 API's credentials (SVC_S3_KEYS_FILE): `{ "keys": [ { "accessKeyId", "secretAccessKey",
// "tenant", "sub", "displayName"?, "scope" } ] }`. Each key maps to a principal as a token does:
// its tenant, its subject (`sub`, the Owner ID of S3's answers; `displayName` their DisplayName)
// and its scope (`blob.read blob.write blob.delete`). Read at start (an invalid file stops it) and
// again by reload() (SIGHUP; an invalid file then keeps the keys in force and says why in the log),
// like the tenant policy (engine/tenancy/policy.ts).

import fs from 'node:fs';
import type { Principal } from '../auth/principal.js';
import { S3_MAX_KEYS, S3_SECRET_MAX_CHARS, S3_SECRET_MIN_CHARS } from '../base/limits.js';
import type { Logger } from '../base/log.js';

export interface S3Key {
  accessKeyId: string;
  secretAccessKey: string;
  /** The caller this key authenticates: tenant, subject (`sub`) and scopes, as a token's claims give them. */
  principal: Principal;
  /** S3's Owner DisplayName (default: `sub`). */
  displayName: string;
}

/** What SigV4 verification asks of the keys: the key of an access key id, if it is known. */
export interface S3KeyLookup {
  find(accessKeyId: string): S3Key | undefined;
}

export class KeysFileError extends Error {}

const FIELDS = ['accessKeyId', 'secretAccessKey', 'tenant', 'sub', 'displayName', 'scope'];
const REQUIRED = ['accessKeyId', 'secretAccessKey', 'tenant', 'sub', 'scope'];
/** An access key id travels in `Credential=<id>/<date>/…`: no `/`, no separators, no white space. */
const ACCESS_KEY_ID = /^[A-Za-z0-9._-]{3,128}$/;
/** A secret: visible ASCII, no white space (it is typed into aws-cli and rclone configurations). */
const SECRET = /^[\x21-\x7e]+$/;
/** A capability, as in a token's `scope` (a trailing `*` matches any rest: engine/auth/principal.ts). */
const CAPABILITY = /^[A-Za-z0-9._:-]+\*?$/;
const NAME_MAX_CHARS = 256;

export class S3Keys implements S3KeyLookup {
  private current: ReadonlyMap<string, S3Key>;

  private constructor(
    private readonly file: string,
    private readonly log: Logger,
  ) {
    this.current = file ? readKeysFile(file) : new Map();
  }

  /** The keys of `file` ('' : none). Throws KeysFileError for a file that is not valid. */
  static open(file: string, log: Logger): S3Keys {
    return new S3Keys(file, log);
  }

  /** Reads the file again (SIGHUP); an invalid file leaves the keys as they were. */
  reload(): boolean {
    if (!this.file) return false;
    try {
      this.current = readKeysFile(this.file);
      this.log.info('S3 keys reloaded', { file: this.file, keys: this.current.size });
      return true;
    } catch (err) {
      this.log.error('S3 keys not reloaded: the file is not valid; the previous keys stay', { file: this.file, err: (err as Error).message });
      return false;
    }
  }

  find(accessKeyId: string): S3Key | undefined {
    return this.current.get(accessKeyId);
  }

  get size(): number {
    return this.current.size;
  }
}

/** The keys of a keys file, by access key id. Throws KeysFileError naming the file and the field. */
export function readKeysFile(file: string): Map<string, S3Key> {
  const fail = (why: string) => new KeysFileError(`SVC_S3_KEYS_FILE ${file}: ${why}`);
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw fail((err as Error).message);
  }
  if (!isObject(raw)) throw fail('not a JSON object');
  for (const key of Object.keys(raw)) if (key !== 'keys') throw fail(`unknown field "${key}"`);
  if (!Array.isArray(raw.keys)) throw fail('"keys" must be an array');
  if (raw.keys.length > S3_MAX_KEYS) throw fail(`"keys" holds ${raw.keys.length} keys, at most ${S3_MAX_KEYS}`);
  const keys = new Map<string, S3Key>();
  raw.keys.forEach((entry: unknown, i: number) => {
    const key = keyOf(entry, `keys[${i}]`, fail);
    if (keys.has(key.accessKeyId)) throw fail(`keys[${i}].accessKeyId: "${key.accessKeyId}" is named twice`);
    keys.set(key.accessKeyId, key);
  });
  return keys;
}

function keyOf(entry: unknown, where: string, fail: (why: string) => KeysFileError): S3Key {
  if (!isObject(entry)) throw fail(`${where} must be an object`);
  for (const field of Object.keys(entry)) if (!FIELDS.includes(field)) throw fail(`${where}: unknown field "${field}"`);
  for (const field of REQUIRED) if (entry[field] === undefined) throw fail(`${where}.${field} is missing`);
  const text = (field: string): string => {
    const value = entry[field];
    if (typeof value !== 'string') throw fail(`${where}.${field} must be a string`);
    return value;
  };
  const name = (field: string): string => {
    const value = text(field);
    if (value === '' || value.length > NAME_MAX_CHARS || /\p{Cc}/u.test(value)) throw fail(`${where}.${field} must be 1 to ${NAME_MAX_CHARS} characters, no control characters`);
    return value;
  };
  const accessKeyId = text('accessKeyId');
  if (!ACCESS_KEY_ID.test(accessKeyId)) throw fail(`${where}.accessKeyId must be 3 to 128 letters, digits, ".", "_" or "-"`);
  const secretAccessKey = text('secretAccessKey');
  if (!SECRET.test(secretAccessKey) || secretAccessKey.length < S3_SECRET_MIN_CHARS || secretAccessKey.length > S3_SECRET_MAX_CHARS) {
    throw fail(`${where}.secretAccessKey must be ${S3_SECRET_MIN_CHARS} to ${S3_SECRET_MAX_CHARS} visible ASCII characters, no spaces`);
  }
  const tenant = name('tenant');
  const sub = name('sub');
  const displayName = entry.displayName === undefined ? sub : name('displayName');
  const scopes = text('scope').split(' ').filter(Boolean);
  if (scopes.length === 0) throw fail(`${where}.scope names no capability (e.g. "blob.read blob.write blob.delete")`);
  for (const scope of scopes) if (!CAPABILITY.test(scope)) throw fail(`${where}.scope: "${scope}" is not a capability`);
  return { accessKeyId, secretAccessKey, displayName, principal: { tenant, subject: sub, scopes, roles: [] } };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
