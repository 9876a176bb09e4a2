/** A configuration that cannot be used: the message names the variable (engine/base/config.ts). */
export class ConfigError extends Error {}
