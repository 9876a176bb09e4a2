// The locality runtime (SVC_LOCALITY): one live owner per session-localized upload, among the live nodes.
export { type LiveNode, ownerOf } from './owner.js';
export { LiveNodes, type LiveNodesDeps, type NodeSeen } from './live-nodes.js';
