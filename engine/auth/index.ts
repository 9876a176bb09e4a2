// Bearer tokens and the principal they name.
export { holds, type Principal } from './principal.js';
export { mayMintFor, parseDevTokenRequest, TokenVerifier } from './tokens.js';
