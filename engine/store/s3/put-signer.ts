// SigV4 for the one request shape a block PUT sends (./block-put.ts): PUT, no query, a fixed set
// of lowercase headers whose values have no spaces to fold, the payload hash given (the block's
// SHA-256). It signs as @smithy/signature-v4 does (test/s3-put-signer.test.ts compares the two),
// without its general path: no header normalization and cloning, no async hashing objects, one
// SHA-256 of the canonical request and one HMAC per request, the signing key derived once per
// day and key. The primitives are the ones the S3 listener verifies with (engine/base/sigv4-primitives.ts).
import { ALGORITHM, credentialScope, deriveSigningKey, hmacHex, stringToSign } from '../../base/sigv4-primitives.js';

/** The SDK's credentials: `accessKeyId`, `secretAccessKey`, a `sessionToken` for temporary ones. */
export interface Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export class PutSigner {
  /** The last signing key: it changes with the day (UTC) and the secret. */
  private cached?: { day: string; secret: string; key: Buffer };

  constructor(
    private readonly region: string,
    private readonly service: string,
    /**
     * The S3 client's credentials provider (`config.credentials`), asked per request as the SDK's
     * signer asks it: the SDK memoizes it and refreshes credentials that expire.
     */
    private readonly credentials: () => Promise<Credentials>,
  ) {}

  /**
   * The headers of `PUT path` signed: `headers` (lowercase names, `x-amz-content-sha256` among
   * them) with `x-amz-date`, `x-amz-security-token` for temporary credentials, and `authorization`.
   * `path` is sent as given (already URI-encoded). `now` (tests): the signing time.
   */
  async sign(path: string, headers: Record<string, string>, now = new Date()): Promise<Record<string, string>> {
    const credentials = await this.credentials();
    // 2024-05-06T07:08:09.123Z -> 20240506T070809Z
    const iso = now.toISOString();
    const date = `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`;
    const day = date.slice(0, 8);
    const signed: Record<string, string> = { ...headers, 'x-amz-date': date };
    if (credentials.sessionToken) signed['x-amz-security-token'] = credentials.sessionToken;
    const names = Object.keys(signed).sort();
    let canonicalHeaders = '';
    for (const name of names) canonicalHeaders += `${name}:${signed[name]}\n`;
    const signedNames = names.join(';');
    const canonical = `PUT\n${path}\n\n${canonicalHeaders}\n${signedNames}\n${signed['x-amz-content-sha256']}`;
    const scope = credentialScope(day, this.region, this.service);
    const signature = hmacHex(this.signingKey(day, credentials.secretAccessKey), stringToSign(date, scope, canonical));
    signed.authorization = `${ALGORITHM} Credential=${credentials.accessKeyId}/${scope}, SignedHeaders=${signedNames}, Signature=${signature}`;
    return signed;
  }

  private signingKey(day: string, secret: string): Buffer {
    const cached = this.cached;
    if (cached && cached.day === day && cached.secret === secret) return cached.key;
    const key = deriveSigningKey(secret, day, this.region, this.service);
    this.cached = { day, secret, key };
    return key;
  }
}
