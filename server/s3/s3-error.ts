// S3's errors: a code from S3's catalogue, its HTTP status and a message, answered as S3's XML
// error document (server/s3/xml.ts errorXml). The S3 listener speaks S3's vocabulary, not the
// blob API's envelope: clients (the AWS SDKs, aws-cli, rclone) branch on these codes.

/** Every code the S3 listener answers, with its status (S3's "List of error codes"). */
export const S3_STATUS = {
  AccessDenied: 403,
  AuthorizationHeaderMalformed: 400,
  AuthorizationQueryParametersError: 400,
  BadDigest: 400,
  BucketAlreadyExists: 409,
  BucketAlreadyOwnedByYou: 409,
  BucketNotEmpty: 409,
  EntityTooLarge: 400,
  EntityTooSmall: 400,
  IncompleteBody: 400,
  InternalError: 500,
  InvalidAccessKeyId: 403,
  InvalidArgument: 400,
  InvalidBucketName: 400,
  InvalidDigest: 400,
  InvalidPart: 400,
  InvalidPartOrder: 400,
  InvalidPartNumber: 416,
  InvalidRange: 416,
  InvalidRequest: 400,
  InvalidToken: 400,
  KeyTooLongError: 400,
  MalformedTrailerError: 400,
  MalformedXML: 400,
  MaxMessageLengthExceeded: 400,
  MetadataTooLarge: 400,
  MethodNotAllowed: 405,
  MissingContentLength: 411,
  MissingSecurityHeader: 400,
  NoSuchBucket: 404,
  NoSuchKey: 404,
  NoSuchUpload: 404,
  NotImplemented: 501,
  PreconditionFailed: 412,
  RequestTimeTooSkewed: 403,
  ServiceUnavailable: 503,
  SignatureDoesNotMatch: 403,
  SlowDown: 503,
  TooManyBuckets: 400,
  XAmzContentSHA256Mismatch: 400,
} as const;

export type S3ErrorCode = keyof typeof S3_STATUS;

/** An S3 failure: `extra` are further elements of the error document (e.g. StringToSign, ServerTime). */
export class S3Error extends Error {
  readonly status: number;

  constructor(
    readonly code: S3ErrorCode,
    message: string,
    readonly extra: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = 'S3Error';
    this.status = S3_STATUS[code];
  }
}

export const isS3Error = (err: unknown): err is S3Error => err instanceof S3Error;
