// Piscina task modules of the blob engine: cut an upload step, store a block, verify a blob.
export { runCutTask as cut, runStoreTask as store, runVerifyTask as verify } from '../engine/cas/block-task.js';
