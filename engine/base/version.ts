import fs from 'node:fs';

/** The package's version (package.json, three levels above the built file): one place to change it. */
export const VERSION: string = JSON.parse(fs.readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')).version;
