// The S3-compatible listener (decisions §5 "S3-compatible API"; docs/s3.md): its own uWS app on
// SVC_S3_API_PORT, one dispatcher for every request. Each request is read (path style, or
// virtual-hosted with SVC_S3_API_DOMAIN), authenticated (SigV4 against SVC_S3_KEYS_FILE's keys
// with security on: the key's tenant, subject and scope make the caller, metered by the tenant
// gate as tokens are; the default tenant with security off), its operation chosen by method,
// bucket, key and query, the operation's scope checked (blob.read, blob.write, blob.delete), and
// the operation's handler (s3-buckets.ts, s3-objects.ts) called. Every failure is S3's XML error
// document with S3's status (s3-answer.ts); every answer carries x-amz-request-id.

import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { type Principal, holds } from '../../engine/auth/index.js';
import type { Engine } from '../../engine/engine.js';
import type { S3Keys } from '../../engine/s3/keys.js';
import { DEFAULT_TENANT } from '../../engine/store/index.js';
import type { Release, RequestMeter } from '../../engine/tenancy/index.js';
import { Exchange } from '../exchange.js';
import { requestIdOf } from '../request-id.js';
import type { Surface } from '../surface.js';
import { answerError } from './s3-answer.js';
import { createBucket, deleteBucket, deleteObjects, getBucketLocation, headBucket, listBuckets, listObjectsV1, listObjectsV2 } from './s3-buckets.js';
import type { S3Call } from './s3-call.js';
import { S3Error } from './s3-error.js';
import { type S3Head, queryOf, readHead } from './s3-head.js';
import { copyObject, deleteObject, getObject, putObject } from './s3-objects.js';
import { abortMultipartUpload, completeMultipartUpload, createMultipartUpload, listMultipartUploads, listParts, uploadPart, uploadPartCopy } from './s3-multipart.js';
import { parseChunkedPayload } from './sigv4-payload.js';
import { type Payload, isSigned, verifyRequest } from './sigv4.js';

/** `run` answers at once (GetObject with its object at hand) or later; a failure either way is S3's error answer. */
type Operation = { name: string; scope: 'blob.read' | 'blob.write' | 'blob.delete'; slot?: boolean; run: (call: S3Call) => void | Promise<void> };

/** Sub-resources of S3 this listener does not serve: 501 NotImplemented. */
const NOT_IMPLEMENTED = new Set([
  'acl', 'tagging', 'versioning', 'versions', 'policy', 'policyStatus', 'lifecycle', 'cors', 'website', 'logging', 'notification', 'replication',
  'encryption', 'object-lock', 'legal-hold', 'retention', 'torrent', 'restore', 'select', 'versionId', 'accelerate',
  'analytics', 'inventory', 'metrics', 'ownershipControls', 'publicAccessBlock', 'requestPayment', 'intelligent-tiering', 'attributes',
  'session', 'renameObject',
]);

const op = (name: string, scope: Operation['scope'], run: Operation['run'], slot = false): Operation => ({ name, scope, run, slot });

/** The operation a request asks for, or an S3Error (501 for what is not served, 405 for a method S3 has not). */
function operationOf(head: S3Head, query: Map<string, string>): Operation {
  for (const name of query.keys()) {
    if (NOT_IMPLEMENTED.has(name)) throw new S3Error('NotImplemented', `A header or query you provided implies functionality that is not implemented (${name})`);
  }
  const { method, bucket, key } = head;
  if (bucket === '') {
    if (method === 'GET') return op('ListBuckets', 'blob.read', listBuckets);
    throw new S3Error('MethodNotAllowed', 'The specified method is not allowed against this resource.');
  }
  if (key === '') {
    switch (method) {
      case 'GET':
        if (query.has('location')) return op('GetBucketLocation', 'blob.read', getBucketLocation);
        if (query.has('uploads')) return op('ListMultipartUploads', 'blob.read', listMultipartUploads);
        return query.get('list-type') === '2' ? op('ListObjectsV2', 'blob.read', listObjectsV2) : op('ListObjects', 'blob.read', listObjectsV1);
      case 'HEAD':
        return op('HeadBucket', 'blob.read', headBucket);
      case 'PUT':
        return op('CreateBucket', 'blob.write', createBucket);
      case 'DELETE':
        return op('DeleteBucket', 'blob.delete', deleteBucket);
      case 'POST':
        if (query.has('delete')) return op('DeleteObjects', 'blob.delete', deleteObjects);
        break;
    }
    throw new S3Error('MethodNotAllowed', 'The specified method is not allowed against this resource.');
  }
  if (query.has('uploadId') || query.has('uploads')) return multipartOperationOf(head, query);
  switch (method) {
    case 'GET':
      return op('GetObject', 'blob.read', getObject, true);
    case 'HEAD':
      return op('HeadObject', 'blob.read', getObject);
    case 'PUT':
      return head.header('x-amz-copy-source') !== undefined ? op('CopyObject', 'blob.write', copyObject) : op('PutObject', 'blob.write', putObject, true);
    case 'DELETE':
      return op('DeleteObject', 'blob.delete', deleteObject);
  }
  throw new S3Error('MethodNotAllowed', 'The specified method is not allowed against this resource.');
}

/** The operations of an object's multipart upload (`?uploads` to start one, `?uploadId` for the rest). */
function multipartOperationOf(head: S3Head, query: Map<string, string>): Operation {
  const { method } = head;
  if (query.has('uploads')) {
    if (method === 'POST') return op('CreateMultipartUpload', 'blob.write', createMultipartUpload);
  } else if (method === 'PUT') {
    if (!query.has('partNumber')) throw new S3Error('InvalidArgument', 'A part upload must name its partNumber', { ArgumentName: 'partNumber' });
    return head.header('x-amz-copy-source') !== undefined ? op('UploadPartCopy', 'blob.write', uploadPartCopy, true) : op('UploadPart', 'blob.write', uploadPart, true);
  } else if (method === 'POST') {
    return op('CompleteMultipartUpload', 'blob.write', completeMultipartUpload);
  } else if (method === 'DELETE') {
    return op('AbortMultipartUpload', 'blob.write', abortMultipartUpload);
  } else if (method === 'GET') {
    return op('ListParts', 'blob.read', listParts);
  }
  throw new S3Error('MethodNotAllowed', 'The specified method is not allowed against this resource.');
}

export interface S3ListenerOptions {
  engine: Engine;
  keys: S3Keys;
}

/** The S3 listener's surface: requests counted as the service's are, its own metrics route label. */
function s3Surface(engine: Engine): Surface {
  return {
    log: engine.log,
    lingerBytes: engine.config.httpLingerBytes,
    known: () => undefined,
    internal: (requestId) => ({ status: 500, body: `InternalError (request ${requestId})` }),
    begin: () => engine.stats.recordRequest(),
    observe(route, method, status, seconds) {
      engine.stats.recordAnswer(status);
      engine.metrics.observeHttp(`${method} ${route}`, status, seconds);
    },
  };
}

export function mountS3Api(app: TemplatedApp, { engine, keys }: S3ListenerOptions): void {
  const surface = s3Surface(engine);
  const { config } = engine;
  const domain = config.s3Api.domain;
  app.any('/*', (res: HttpResponse, req: HttpRequest) => {
    const requestId = requestIdOf(req.getHeader('x-request-id'));
    const ex = new Exchange(res, req, 's3', surface, [['x-amz-request-id', requestId]], requestId);
    let head: S3Head | undefined;
    try {
      head = readHead(req, domain);
      // Bodies are read from their first byte (uWS drops what arrives before a reader is set).
      if (head.method === 'PUT' || head.method === 'POST') ex.body.hold();
      const query = queryOf(head);
      const operation = operationOf(head, query);
      const call = authenticate(engine, keys, ex, head, query);
      if (!holds(call.principal, operation.scope)) throw new S3Error('AccessDenied', `Access Denied: the key does not grant ${operation.scope}`);
      const resource = head.resource;
      const fail = (err: unknown) => answerError(ex, resource, err);
      const release = admit(engine, call, operation);
      if (release instanceof Promise) {
        release.then((r) => {
          ex.onFinish(r);
          if (ex.live) run(operation, call, fail);
          else r();
        }, fail);
        return;
      }
      if (release) ex.onFinish(release);
      run(operation, call, fail);
    } catch (err) {
      answerError(ex, head?.resource ?? req.getUrl(), err);
    }
  });
}

function run(operation: Operation, call: S3Call, fail: (err: unknown) => void): void {
  try {
    operation.run(call)?.catch(fail);
  } catch (err) {
    fail(err);
  }
}

/** The tenant gate's request budget and, for reads and writes of bytes, one of the tenant's slots (security on). */
function admit(engine: Engine, call: S3Call, operation: Operation): Release | Promise<Release> | undefined {
  if (!call.gated) return undefined;
  // The gate as the listener's meter, as the routers have it: the rules are the gate's.
  const meter: RequestMeter = engine.gate;
  meter.request(call.principal, 'cluster');
  if (!operation.slot) return undefined;
  return meter.admit(call.principal, 'cluster', () => {
    const controller = new AbortController();
    call.ex.onAbort(() => controller.abort());
    return controller.signal;
  });
}

/** The caller of the default tenant with security off: every capability. */
const ANONYMOUS: Principal = { tenant: DEFAULT_TENANT, subject: 'anonymous', scopes: ['*'], roles: [] };

/** The caller and how its body is signed. */
function authenticate(engine: Engine, keys: S3Keys, ex: Exchange, head: S3Head, query: Map<string, string>): S3Call {
  const base = { engine, ex, head, query };
  if (!engine.config.securityEnabled) {
    // Any credentials or none: the default tenant. A signed request of a known key is still
    // verified (its chunks too); otherwise the body is read as its x-amz-content-sha256 says.
    const known = isSigned(head) ? verifyKnown(engine, keys, head) : undefined;
    const payload = known?.payload ?? unverifiedPayload(head);
    return { ...base, principal: ANONYMOUS, displayName: 'anonymous', gated: false, payload, charge: () => {} };
  }
  const verified = verifyRequest(head, { keys, region: engine.config.s3Api.region });
  const principal = verified.key.principal;
  const meter: RequestMeter = engine.gate;
  return {
    ...base, principal, displayName: verified.key.displayName, gated: true, payload: verified.payload,
    charge: (bytes) => meter.bytes(principal, bytes, 'cluster'),
  };
}

function verifyKnown(engine: Engine, keys: S3Keys, head: S3Head) {
  try {
    return verifyRequest(head, { keys, region: engine.config.s3Api.region });
  } catch {
    return undefined;
  }
}

function unverifiedPayload(head: S3Head): Payload {
  const hash = head.header('x-amz-content-sha256')?.trim();
  if (hash === undefined || hash === 'UNSIGNED-PAYLOAD' || /^[0-9a-fA-F]{64}$/.test(hash)) return { kind: 'unsigned' };
  const payload = parseChunkedPayload(hash, head, { key: Buffer.alloc(32), dateTime: '', scope: '', seed: '' });
  return payload.kind === 'chunked' ? { ...payload, signing: null } : payload;
}
