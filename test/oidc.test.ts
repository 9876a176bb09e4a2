// svc with SVC_SECURITY_ENABLED=true against a real OpenID provider (oidc-provider, the
// certified Node implementation) started here on a loopback port: svc finds the JWKS through the
// issuer's discovery document, accepts the provider's client-credentials access tokens (RS256
// JWTs, audience and scopes from the resource server's settings, org_id added as a claim), and
// follows a key rotation while it runs.
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import Provider from 'oidc-provider';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from './helpers/server.js';

const AUDIENCE = 'urn:svc:blobs';
const CAPABILITIES = ['blob.read', 'blob.write', 'blob.delete', 'observability.read', 'gc.run'];

let issuer: string;
let idp: http.Server;
/** The provider answering now: replaced by a new one to rotate the keys on the same address. */
let current: http.RequestListener;
let server: TestServer;
/** The provider's first signing key (still published after the rotation). */
let keyOne: JWK;

async function signingKey(kid: string): Promise<JWK> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  return { ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
}

function provider(keys: JWK[]): http.RequestListener {
  const p = new Provider(issuer, {
    clients: [{ client_id: 'svc-test', client_secret: 'test-secret', grant_types: ['client_credentials'], redirect_uris: [], response_types: [], token_endpoint_auth_method: 'client_secret_post' }],
    jwks: { keys },
    scopes: CAPABILITIES,
    features: {
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => AUDIENCE,
        useGrantedResource: () => true,
        getResourceServerInfo: () => ({ scope: CAPABILITIES.join(' '), audience: AUDIENCE, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } } }),
      },
    },
    extraTokenClaims: () => ({ org_id: 'acme' }),
    ttl: { ClientCredentials: 600 },
  });
  return p.callback() as http.RequestListener;
}

async function accessToken(scope: string): Promise<{ token: string; kid: string }> {
  const res = await fetch(`${issuer}/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: 'svc-test', client_secret: 'test-secret', scope, resource: AUDIENCE }),
  });
  expect(res.status).toBe(200);
  const token = ((await res.json()) as { access_token: string }).access_token;
  return { token, kid: JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()).kid };
}

const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

beforeAll(async () => {
  idp = http.createServer((req, res) => current(req, res));
  await new Promise<void>((resolve) => idp.listen(0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(idp.address() as { port: number }).port}`;
  keyOne = await signingKey('key-1');
  current = provider([keyOne]);
  server = await startServer({
    SVC_SECURITY_ENABLED: 'true',
    SVC_OIDC_ISSUER: issuer,
    SVC_OIDC_AUDIENCE: AUDIENCE,
    SVC_OIDC_JWKS_REFRESH: '1s',
  });
});

afterAll(async () => {
  await server?.stop();
  await new Promise((resolve) => idp?.close(resolve));
});

describe('a real OpenID provider', () => {
  it('its client-credentials tokens work, found through discovery, with their scopes as capabilities', async () => {
    const { token } = await accessToken('blob.read blob.write');
    const body = randomBytes(20_000);
    const put = await fetch(`${server.url}/api/v1/blobs`, { method: 'POST', headers: bearer(token), body });
    expect(put.status).toBe(201);
    const id = ((await put.json()) as { blob: { id: string } }).blob.id;
    expect((await fetch(`${server.url}/api/v1/blobs/${id}`, { headers: bearer(token) })).status).toBe(200);
    // Not granted to this token: blob.delete.
    const del = await fetch(`${server.url}/api/v1/blobs/${id}`, { method: 'DELETE', headers: bearer(token) });
    expect(del.status).toBe(403);
    const { token: deleter } = await accessToken('blob.delete');
    expect((await fetch(`${server.url}/api/v1/blobs/${id}`, { method: 'DELETE', headers: bearer(deleter) })).status).toBe(204);
  });

  it('follows a key rotation while svc runs: tokens of the new key are accepted, the old key\'s stay valid while published', async () => {
    const before = await accessToken('blob.read');
    expect(before.kid).toBe('key-1');
    expect((await fetch(`${server.url}/api/v1/blobs`, { headers: bearer(before.token) })).status).toBe(200);
    // The provider now signs with key-2 and still publishes key-1.
    current = provider([await signingKey('key-2'), keyOne]);
    await new Promise((resolve) => setTimeout(resolve, 1200)); // SVC_OIDC_JWKS_REFRESH
    const after = await accessToken('blob.read');
    expect(after.kid).toBe('key-2');
    expect((await fetch(`${server.url}/api/v1/blobs`, { headers: bearer(after.token) })).status).toBe(200);
    expect((await fetch(`${server.url}/api/v1/blobs`, { headers: bearer(before.token) })).status).toBe(200);
  });
});
