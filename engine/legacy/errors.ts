// The failures of a legacy read, each with its kind, code and the reason its metrics count.

import { type FailureKind, SvcError } from '../base/errors.js';

/** Why a legacy read failed: the `reason` label of svc_legacy_read_failures_total. */
export type LegacyFailure =
  | 'repo_not_found'
  | 'invalid_id'
  | 'document_not_found'
  | 'binary_not_found'
  | 'metadata_invalid'
  | 'unreadable'
  | 'link_escape'
  | 'size_mismatch'
  | 'stream_failed'
  | 'client_gone';

export class LegacyError extends SvcError {
  constructor(kind: FailureKind, code: string, message: string, readonly reason: LegacyFailure) {
    super(kind, code, message);
  }
}

const show = (s: string) => JSON.stringify(s.length > 80 ? `${s.slice(0, 80)}…` : s);

export const legacyRepoNotFound = (repo: string) => new LegacyError('not_found', 'legacy_repo_not_found', `No legacy repository ${show(repo)}`, 'repo_not_found');
export const legacyInvalidId = (message: string) => new LegacyError('invalid', 'invalid_request', message, 'invalid_id');
export const legacyDocumentNotFound = (repo: string, docId: string) =>
  new LegacyError('not_found', 'legacy_document_not_found', `No metadata for ${show(docId)} in legacy repository ${show(repo)}`, 'document_not_found');
export const legacyBinaryNotFound = (repo: string, docId: string, hash: string) =>
  new LegacyError('not_found', 'legacy_binary_not_found', `The binary ${hash} of ${show(docId)} is not in legacy repository ${show(repo)}`, 'binary_not_found');
export const legacyMetadataInvalid = (docId: string, why: string) =>
  new LegacyError('unprocessable', 'legacy_metadata_invalid', `The metadata of ${show(docId)} is not usable: ${why}`, 'metadata_invalid');
/** 409: the file is there but cannot be read (permissions, not a regular file, corrupt). */
export const legacyUnreadable = (what: string, why: string) => new LegacyError('conflict', 'legacy_unreadable', `The ${what} exists but cannot be read: ${why}`, 'unreadable');
export const legacyLinkEscape = (what: string) =>
  new LegacyError('conflict', 'legacy_unreadable', `The ${what} is reached through a link that leaves the repository root`, 'link_escape');
export const legacySizeMismatch = (docId: string, declared: number, actual: number) =>
  new LegacyError('conflict', 'legacy_unreadable', `The binary of ${show(docId)} has ${actual} bytes where its metadata says ${declared}`, 'size_mismatch');
