// Piscina task modules of the blob engine: chunk/hash/store one upload step; verify a blob.
export { runChunkTask as chunk, runVerifyTask as verify } from '../engine/cas/block-task.js';
