// Bearer tokens and the principal they name.
export { holds, type Principal } from './principal.js';
export { type DevTokenRequest, mayMintFor, TokenVerifier } from './tokens.js';
export { ANONYMOUS, type CursorOwner, type CursorRefusals, CursorSeal, type ListCursors } from './cursor-seal.js';
