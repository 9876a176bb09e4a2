// Bearer JWT verification with jose: HS256 with the development shared secret, RS256/ES256
// against a JWKS (file or URL) with issuer and audience checks. Also mints development tokens.

import { createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import fs from 'node:fs';
import { LRUCache } from 'lru-cache';
import { SignJWT, createLocalJWKSet, createRemoteJWKSet, decodeProtectedHeader, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import type { AuthConfig } from '../base/config.js';
import { SvcError } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import type { DevSecretStore } from '../store/index.js';
import type { Principal } from './principal.js';
import { DEV_SECRET_MIN_BYTES } from '../base/limits.js';
import { StartRefused } from '../store/dependency-failure.js';

export const unauthenticated = (message: string) => new SvcError('unauthenticated', 'unauthenticated', message);

/** Every capability of the document platform: what a development token gets by default. */
const ALL_CAPABILITIES = [
  'doc.create', 'doc.read', 'doc.write', 'meta.read', 'meta.write:*', 'meta.patch:*', 'schema.write', 'migration.write',
  'workflow.run:*', 'job.read', 'legacy.read', 'legacy.import',
].join(' ');

/** A dev token asked of POST /dev/token (parsed at the edge: server/commands/dev-token.ts). */
export interface DevTokenRequest {
  org_id?: string;
  sub?: string;
  scope?: string;
  roles?: string[];
  ttl_seconds?: number;
}


const BEARER = /^Bearer\s+([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*)\s*$/i;

/** Verified tokens kept for reuse (a client sends the same token with every request). */
const CACHED_TOKENS = 10_000;
/**
 * And the characters they hold together (tokens, headers and principals): a token is bounded
 * only by the HTTP parser's header limit, and its scopes and roles ride in it.
 */
const CACHED_TOKEN_CHARS = 8 * 1024 * 1024;

interface Verified {
  principal: Principal;
  /** ms */
  expiresAt: number;
}

/** A cache of verified tokens by `key` (the token, or the whole header), least recently used dropped first. */
function tokenCache(): LRUCache<string, Verified> {
  return new LRUCache<string, Verified>({ max: CACHED_TOKENS, maxSize: CACHED_TOKEN_CHARS, sizeCalculation: (v, key) => key.length + principalChars(v.principal) });
}

/** What a principal holds, in characters (its strings; a few dozen for the object itself). */
function principalChars(p: Principal): number {
  let n = 64 + p.subject.length + p.tenant.length;
  for (const s of p.scopes) n += s.length + 8;
  for (const r of p.roles) n += r.length + 8;
  return n;
}

export class TokenVerifier {
  private readonly secret?: Uint8Array;
  /** The HS256 key imported once (jose would import the raw secret on every verification). */
  private readonly hmacKey?: KeyObject;
  private jwks?: JWTVerifyGetKey;
  /** The JWKS of the issuer's discovery document, found at the first token that needs it. */
  private discovered?: Promise<JWTVerifyGetKey>;
  /** token → its principal and expiry. */
  private readonly verified = tokenCache();

  private constructor(
    private readonly config: AuthConfig,
    secret: Uint8Array | undefined,
    private readonly log?: Logger,
  ) {
    this.secret = secret;
    this.hmacKey = secret ? createSecretKey(secret) : undefined;
    if (config.jwksFile) this.jwks = createLocalJWKSet(JSON.parse(fs.readFileSync(config.jwksFile, 'utf8')));
    else if (config.jwksUri) this.jwks = remoteKeys(config.jwksUri, config.jwksRefreshMs);
  }

  /**
   * The development secret: configured, or generated once and kept by `secrets` (a file in the
   * data directory; on pg-s3 the database, shared by every node). With security enabled it is
   * never generated: HS256 tokens then need an explicit secret.
   */
  static async open(config: AuthConfig, secrets: DevSecretStore, log: Logger, securityEnabled = false): Promise<TokenVerifier> {
    if (config.devSharedSecret === 'off' || (securityEnabled && config.devSharedSecret === '')) return new TokenVerifier(config, undefined, log);
    if (config.devSharedSecret) {
      const secret = new TextEncoder().encode(config.devSharedSecret);
      if (securityEnabled && secret.byteLength < DEV_SECRET_MIN_BYTES) {
        throw new StartRefused('SVC_DEV_SHARED_SECRET', `with SVC_SECURITY_ENABLED=true the development secret must be at least ${DEV_SECRET_MIN_BYTES} bytes (it has ${secret.byteLength}): generate one (openssl rand -hex 32), or set it to off`);
      }
      const verifier = new TokenVerifier(config, secret, log);
      if (securityEnabled && verifier.devTokensEnabled) {
        log.warn('development tokens are enabled: POST /dev/token mints a token of any tenant and capability for a direct loopback request (SVC_DEV_SHARED_SECRET; SVC_DEV_TOKEN_ENDPOINT=off disables the endpoint)');
      }
      return verifier;
    }
    const { secret, created } = await secrets.keep(randomBytes(32).toString('base64url'));
    if (created) log.info('generated the development token secret (SVC_DEV_SHARED_SECRET); mint tokens with POST /dev/token from this host', { keptIn: secrets.location });
    return new TokenVerifier(config, new TextEncoder().encode(secret), log);
  }

  get devTokensEnabled(): boolean {
    return this.secret !== undefined && this.config.devTokenEndpoint !== 'off';
  }

  /**
   * The principal of a token verified before and not expired, without waiting; undefined
   * otherwise. Looked up by the whole header value (no parsing: this is every request's cost).
   */
  cached(authorization: string | undefined): Principal | undefined {
    if (!authorization) return undefined;
    const hit = this.byHeader.get(authorization);
    return hit && hit.expiresAt > Date.now() ? hit.principal : undefined;
  }

  /** The verified tokens by the Authorization header that carried them. */
  private readonly byHeader = tokenCache();

  /** The principal of an `Authorization` header value; 401 `unauthenticated` otherwise. */
  async verify(authorization: string | undefined): Promise<Principal> {
    if (!authorization) throw unauthenticated('An Authorization: Bearer <JWT> header is required');
    const m = BEARER.exec(authorization);
    if (!m) throw unauthenticated('The Authorization header is not a Bearer JWT');
    const token = m[1]!;
    const cached = this.verified.get(token);
    if (cached && cached.expiresAt > Date.now()) return cached.principal;
    let payload: JWTPayload;
    try {
      payload = await this.check(token);
    } catch (err) {
      if (err instanceof SvcError) throw err;
      throw unauthenticated(`The bearer token is not valid: ${describe(err)}`);
    }
    const principal = principalOf(payload);
    const entry: Verified = { principal, expiresAt: payload.exp! * 1000 };
    this.verified.set(token, entry);
    this.byHeader.set(authorization, entry);
    return principal;
  }

  private async check(token: string): Promise<JWTPayload> {
    const { alg } = decodeProtectedHeader(token);
    if (alg === 'HS256') {
      if (!this.secret) throw unauthenticated('HS256 tokens are not accepted by this server');
      return (await jwtVerify(token, this.hmacKey!, { algorithms: ['HS256'], requiredClaims: ['exp'] })).payload;
    }
    if (alg === 'RS256' || alg === 'ES256') {
      const jwks = this.jwks ?? (await this.discoveredKeys());
      if (!jwks) throw unauthenticated(`${alg} tokens need SVC_OIDC_ISSUER, SVC_OIDC_JWKS_URI or SVC_OIDC_JWKS_FILE on the server`);
      const options = {
        algorithms: [alg],
        requiredClaims: ['exp'],
        issuer: this.config.oidcIssuer || undefined,
        audience: this.config.oidcAudience || undefined,
      };
      return (await jwtVerify(token, jwks, options)).payload;
    }
    throw unauthenticated(`Token algorithm ${JSON.stringify(alg)} is not accepted (HS256, RS256, ES256)`);
  }

  /**
   * The keys named by the issuer's discovery document (`<SVC_OIDC_ISSUER>/.well-known/openid-configuration`),
   * when no JWKS is configured. A failed discovery is tried again by the next token.
   */
  private async discoveredKeys(): Promise<JWTVerifyGetKey | undefined> {
    const issuer = this.config.oidcIssuer;
    if (!issuer) return undefined;
    this.discovered ??= (async () => {
      const url = new URL('.well-known/openid-configuration', issuer.endsWith('/') ? issuer : `${issuer}/`);
      const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
      if (!res.ok) throw new Error(`discovery answered ${res.status}`);
      const doc = (await res.json()) as { jwks_uri?: unknown; issuer?: unknown };
      if (typeof doc.jwks_uri !== 'string') throw new Error('the discovery document names no jwks_uri');
      return (this.jwks = remoteKeys(doc.jwks_uri, this.config.jwksRefreshMs));
    })();
    try {
      return await this.discovered;
    } catch (err) {
      this.discovered = undefined;
      this.log?.warn('OIDC discovery failed', { issuer, err: String(err) });
      throw unauthenticated('The token issuer\'s keys could not be fetched');
    }
  }

  /** A development token (POST /dev/token): HS256 with the shared secret. */
  async mint(request: DevTokenRequest): Promise<{ access_token: string; token_type: 'Bearer'; expires_in: number }> {
    if (!this.secret) throw new SvcError('not_found', 'not_found', 'Development tokens are disabled');
    const ttl = request.ttl_seconds ?? 3600;
    const jwt = await new SignJWT({ org_id: request.org_id ?? 'dev', scope: request.scope ?? ALL_CAPABILITIES, roles: request.roles ?? [] })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setSubject(request.sub ?? 'dev-user')
      .setIssuedAt()
      .setExpirationTime(Math.floor(Date.now() / 1000) + ttl)
      .sign(this.hmacKey!);
    return { access_token: jwt, token_type: 'Bearer', expires_in: ttl };
  }
}

/** A provider's key set, fetched when a token names a key it does not hold (at most once per `cooldownMs`). */
function remoteKeys(uri: string, cooldownMs: number): JWTVerifyGetKey {
  return createRemoteJWKSet(new URL(uri), { cooldownDuration: cooldownMs, timeoutDuration: 5000 });
}

/** Headers a proxy adds: a request that carries one came through a proxy, whatever its socket's peer. */
const PROXY_HEADERS = ['forwarded', 'x-forwarded-for', 'x-real-ip'];

/**
 * Whether POST /dev/token answers a request: from a loopback address, and not relayed (a proxy on
 * the same host makes every client's socket local, so a header a proxy adds refuses it).
 * `headerOf` reads a request header by its lower-case name.
 */
export function mayMintFor(peer: string, headerOf: (name: string) => string | undefined): boolean {
  return isLoopback(peer) && PROXY_HEADERS.every((name) => headerOf(name) === undefined);
}

function isLoopback(address: string): boolean {
  return address === '127.0.0.1' || address === '::1' || address === '::ffff:127.0.0.1' || address === '0000:0000:0000:0000:0000:0000:0000:0001';
}

/** Checks a POST /dev/token body. */
function principalOf(payload: JWTPayload): Principal {
  const tenant = payload.org_id;
  if (typeof tenant !== 'string' || tenant === '') throw unauthenticated('The token has no org_id claim');
  if (typeof payload.sub !== 'string' || payload.sub === '') throw unauthenticated('The token has no sub claim');
  const scope = payload.scope;
  if (scope !== undefined && typeof scope !== 'string') throw unauthenticated('The token\'s scope claim is not a string');
  const roles = payload.roles ?? [];
  if (!Array.isArray(roles) || !roles.every((r) => typeof r === 'string')) throw unauthenticated('The token\'s roles claim is not an array of strings');
  return { subject: payload.sub, tenant, scopes: (scope ?? '').split(' ').filter(Boolean), roles };
}

function describe(err: unknown): string {
  const code = (err as { code?: string })?.code;
  switch (code) {
    case 'ERR_JWT_EXPIRED':
      return 'it has expired';
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
      return 'the signature does not verify';
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
      return (err as Error).message;
    case 'ERR_JWKS_NO_MATCHING_KEY':
      return 'no key of the JWKS matches it';
    default:
      return 'it cannot be decoded or verified';
  }
}
