// The locality runtime (SVC_LOCALITY): one live owner per session-localized upload.
export { type LiveNode, ownerOf } from './owner.js';
