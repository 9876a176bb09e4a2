// How a blob is cut into blocks: a session's stored choice and the chunkers' parameter
// (engine/cas/chunkers.ts cuts by it).

export type ChunkerSpec =
  | { kind: 'fastcdc'; min: number; avg: number; max: number }
  | { kind: 'fixed'; size: number }
  | { kind: 'pdf'; target: number; max: number; fallback: { kind: 'fastcdc'; min: number; avg: number; max: number } };
