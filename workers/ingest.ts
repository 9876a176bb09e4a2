// Piscina task modules of the blob engine: store blocks, verify a blob.
export { runStoreTask as store, runVerifyTask as verify } from '../engine/cas/block-task.js';
