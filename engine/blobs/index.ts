// The blob API's operations on published blobs: reads, inventory, verification, delete.
export { Blobs, type BlobsDeps } from './blobs.js';
