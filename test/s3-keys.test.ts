// The S3 API's keys file (SVC_S3_KEYS_FILE) and its variables (issue 39): a valid file maps keys to
// principals; every invalid one is refused naming the file and the field; reload() takes a new
// file and keeps the keys in force when the new one is invalid.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../dist/engine/base/config.js';
import { Logger } from '../dist/engine/base/log.js';
import { KeysFileError, S3Keys, readKeysFile } from '../dist/engine/s3/keys.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-s3-keys-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const alice = { accessKeyId: 'AKIAALICE0000001', secretAccessKey: SECRET, tenant: 't1', sub: 'alice', displayName: 'Alice A.', scope: 'blob.read blob.write blob.delete' };
const bob = { accessKeyId: 'AKIABOB000000002', secretAccessKey: SECRET.replace('w', 'x'), tenant: 't2', sub: 'bob', scope: 'blob.read' };

let n = 0;
function file(content: unknown): string {
  const f = path.join(dir, `keys-${n++}.json`);
  fs.writeFileSync(f, typeof content === 'string' ? content : JSON.stringify(content));
  return f;
}

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    if (err instanceof KeysFileError) return err.message;
    throw err;
  }
  throw new Error('no refusal');
}

describe('SVC_S3_KEYS_FILE', () => {
  it('maps each key to its principal; displayName defaults to sub', () => {
    const keys = readKeysFile(file({ keys: [alice, bob] }));
    expect(keys.get('AKIAALICE0000001')).toEqual({
      accessKeyId: 'AKIAALICE0000001',
      secretAccessKey: SECRET,
      displayName: 'Alice A.',
      principal: { tenant: 't1', subject: 'alice', scopes: ['blob.read', 'blob.write', 'blob.delete'], roles: [] },
    });
    expect(keys.get('AKIABOB000000002')?.displayName).toBe('bob');
    expect(readKeysFile(file({ keys: [] })).size).toBe(0);
  });

  it('refuses an invalid file naming the file and the field', () => {
    const cases: Array<[unknown, string]> = [
      ['{ not json', 'Expected property name'],
      [[alice], 'not a JSON object'],
      [{ keys: [alice], extra: 1 }, 'unknown field "extra"'],
      [{}, '"keys" must be an array'],
      [{ keys: [alice, 'bob'] }, 'keys[1] must be an object'],
      [{ keys: [{ ...alice, role: 'admin' }] }, 'keys[0]: unknown field "role"'],
      [{ keys: [{ ...alice, tenant: undefined }] }, 'keys[0].tenant is missing'],
      [{ keys: [{ ...alice, sub: 42 }] }, 'keys[0].sub must be a string'],
      [{ keys: [{ ...alice, sub: '' }] }, 'keys[0].sub must be 1 to 256 characters, no control characters'],
      [{ keys: [{ ...alice, tenant: 'a\nb' }] }, 'keys[0].tenant must be 1 to 256 characters'],
      [{ keys: [{ ...alice, accessKeyId: 'AKIA/ALICE' }] }, 'keys[0].accessKeyId must be 3 to 128 letters, digits'],
      [{ keys: [{ ...alice, secretAccessKey: 'short-secret' }] }, 'keys[0].secretAccessKey must be 32 to 256 visible ASCII characters'],
      [{ keys: [{ ...alice, secretAccessKey: `${SECRET} with spaces` }] }, 'keys[0].secretAccessKey must be 32 to 256'],
      [{ keys: [{ ...alice, scope: '  ' }] }, 'keys[0].scope names no capability'],
      [{ keys: [{ ...alice, scope: 'blob.read blob/write' }] }, 'keys[0].scope: "blob/write" is not a capability'],
      [{ keys: [alice, { ...bob, accessKeyId: alice.accessKeyId }] }, 'keys[1].accessKeyId: "AKIAALICE0000001" is named twice'],
    ];
    for (const [content, why] of cases) {
      const f = file(content);
      const message = refusal(() => readKeysFile(f));
      expect(message.startsWith(`SVC_S3_KEYS_FILE ${f}: `)).toBe(true);
      expect(message).toContain(why);
    }
    expect(refusal(() => readKeysFile(path.join(dir, 'missing.json')))).toContain('ENOENT');
    expect(refusal(() => S3Keys.open(file({ keys: [{ ...alice, scope: '' }] }), new Logger('silent')))).toContain('scope names no capability');
  });

  it('reload() takes a changed file, and keeps the keys in force when the new file is invalid', () => {
    const f = file({ keys: [alice] });
    const keys = S3Keys.open(f, new Logger('silent'));
    expect([keys.size, keys.find('AKIAALICE0000001')?.principal.tenant, keys.find('AKIABOB000000002')]).toEqual([1, 't1', undefined]);
    fs.writeFileSync(f, JSON.stringify({ keys: [bob] }));
    expect(keys.reload()).toBe(true);
    expect([keys.find('AKIAALICE0000001'), keys.find('AKIABOB000000002')?.principal.subject]).toEqual([undefined, 'bob']);
    fs.writeFileSync(f, JSON.stringify({ keys: [{ ...alice, secretAccessKey: 'x' }] }));
    expect(keys.reload()).toBe(false);
    expect(keys.find('AKIABOB000000002')?.principal.subject).toBe('bob');
    const none = S3Keys.open('', new Logger('silent'));
    expect([none.size, none.reload(), none.find('AKIAALICE0000001')]).toEqual([0, false, undefined]);
  });
});

describe('SVC_S3_API_* variables', () => {
  it('defaults: port 9000, no domain, us-east-1, no keys file', () => {
    expect(loadConfig({}).s3Api).toEqual({ port: 9000, domain: '', region: 'us-east-1', keysFile: '' });
  });

  it('takes off, a port, a domain, a region and a keys file; refuses bad values naming the variable', () => {
    expect(loadConfig({ SVC_S3_API_PORT: 'off' }).s3Api.port).toBeNull();
    expect(loadConfig({ SVC_S3_API_PORT: '0', SVC_S3_API_DOMAIN: 'S3.Example.com.', SVC_S3_API_REGION: 'eu-west-3', SVC_S3_KEYS_FILE: '/etc/svc/s3-keys.json' }).s3Api).toEqual({
      port: 0,
      domain: 's3.example.com',
      region: 'eu-west-3',
      keysFile: '/etc/svc/s3-keys.json',
    });
    for (const [name, value] of [['SVC_S3_API_PORT', '65536'], ['SVC_S3_API_PORT', 'on'], ['SVC_S3_API_DOMAIN', 'bad_domain'], ['SVC_S3_API_DOMAIN', 'a..b'], ['SVC_S3_API_REGION', 'US East']]) {
      expect(() => loadConfig({ [name!]: value })).toThrow(ConfigError);
      expect(() => loadConfig({ [name!]: value })).toThrow(name);
    }
  });
});
