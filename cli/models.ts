// `svc models example DIR`: writes the project's example MLeap bundle (a rent model, see
// engine/models/example-bundle.ts) as a directory, to register with the model runtime at once.
// Local only: it talks to no server.

import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { EXAMPLE_FRAME, exampleBundleFiles } from '../engine/models/example-bundle.js';
import type { Command, Parsed } from './args.js';
import { CliError, UsageError } from './errors.js';

export const models: Command = {
  usage: `  svc models example DIR
                   write a small example MLeap bundle (rent from area, rooms and city) into the
                   new or empty directory DIR, and print how to register and try it (docs/models.md)
`,
  options: {},
  run: writeExample,
};

async function writeExample(parsed: Parsed): Promise<number> {
  const [sub, dir, ...extra] = parsed.positionals;
  if (sub !== 'example') throw new UsageError(sub === undefined ? 'models: which subcommand? (example)' : `models: unknown subcommand "${sub}"`);
  if (dir === undefined || extra.length > 0) throw new UsageError('models example takes one directory');
  const root = resolve(dir);
  if (existsSync(root) && readdirSync(root).length > 0) throw new CliError(`${root} is not empty: name a new or empty directory`);
  for (const [path, text] of Object.entries(exampleBundleFiles())) {
    const file = join(root, path);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, text);
  }
  const uri = pathToFileURL(root).href;
  process.stdout.write(`${uri}\n`);
  process.stderr.write(
    `Wrote an example MLeap bundle to ${root}. Register and try it (model runtime, port 8080):\n` +
      `  curl -s -X PUT --data '${uri}' localhost:8080/models/rent\n` +
      `  curl -s -X POST 'localhost:8080/models/rent/transform?select=rent' -d '${JSON.stringify(EXAMPLE_FRAME)}'\n`,
  );
  return 0;
}
