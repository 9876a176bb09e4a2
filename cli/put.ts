// `svc put FILE`: a direct upload below the threshold, a resumable session at or above it.

import fs from 'node:fs';
import path from 'node:path';
import { type Command, type Parsed, SERVER_OPTION, parseSize, serverUrl, stringOption } from './args.js';
import { formatBlobId } from './blob-id.js';
import { CliError, UsageError } from './errors.js';
import { FileHasher, rangeStream } from './file-range.js';
import { apiError, readJson, request } from './http.js';
import { Progress } from './progress.js';
import { defaultStatePath } from './put-state.js';
import { resumablePut } from './resumable.js';
import { Backoff, retryNote } from './retry.js';

export const put: Command = {
  usage: `  svc put FILE [--type MEDIA_TYPE] [--part-size SIZE] [--threshold SIZE] [--state FILE]
                   upload FILE and print its blob id; files of --threshold (64MiB) or more go
                   through a resumable session in --part-size (8MiB) parts, resumed after
                   failures and after the client itself was stopped (state in --state FILE)
`,
  options: {
    ...SERVER_OPTION,
    type: { type: 'string' },
    'part-size': { type: 'string' },
    threshold: { type: 'string' },
    state: { type: 'string' },
  },
  run: putFile,
};

async function putFile(parsed: Parsed): Promise<number> {
  if (parsed.positionals.length !== 1) throw new UsageError('put needs exactly one FILE');
  const server = serverUrl(parsed);
  const file = path.resolve(parsed.positionals[0]);
  const contentType = stringOption(parsed, 'type');
  if (contentType !== undefined && !/^[^\s/]+\/[^\s/]+/.test(contentType)) throw new UsageError(`--type: "${contentType}" is not a media type (example: application/pdf)`);
  const partSize = parseSize(stringOption(parsed, 'part-size') ?? '8MiB', '--part-size');
  const threshold = parseSize(stringOption(parsed, 'threshold') ?? '64MiB', '--threshold');

  let stat: fs.Stats;
  try {
    stat = fs.statSync(file);
    fs.accessSync(file, fs.constants.R_OK);
  } catch (err) {
    throw new CliError(`cannot read ${parsed.positionals[0]}: ${(err as Error).message}`);
  }
  if (!stat.isFile()) throw new CliError(`${parsed.positionals[0]} is not a regular file`);

  const progress = new Progress(`put ${path.basename(file)}`, stat.size);
  let id: string;
  try {
    id =
      stat.size < threshold
        ? await directPut(server, file, stat, contentType, progress)
        : await resumablePut({
            server,
            file,
            size: stat.size,
            mtimeMs: stat.mtimeMs,
            contentType,
            partSize,
            statePath: stringOption(parsed, 'state') ?? defaultStatePath(file, stat.size, stat.mtimeMs),
            progress,
          });
  } catch (err) {
    progress.abort();
    throw err;
  }
  progress.finish();
  process.stdout.write(`${id}\n`);
  return 0;
}

/** One POST of the whole file, streamed; sent again whole after a failure (same bytes, same id). */
async function directPut(server: string, file: string, stat: fs.Stats, contentType: string | undefined, progress: Progress): Promise<string> {
  const backoff = new Backoff((err, delay, attempt) => progress.note(retryNote(`svc put ${file}`)(err, delay, attempt)));
  const hasher = new FileHasher(file);
  return backoff.retry(async () => {
    hasher.reset();
    progress.update(0);
    const body = rangeStream(file, 0, stat.size, (position, chunk) => {
      hasher.see(position, chunk);
      progress.update(position + chunk.length);
    });
    const reply = await request(server, '/api/v1/blobs', { method: 'POST', headers: { 'Content-Length': stat.size, 'Content-Type': contentType }, body });
    if (reply.status !== 201) throw await apiError(reply);
    const json = await readJson<{ blob?: { id?: string } }>(reply);
    const id = json.blob?.id;
    if (typeof id !== 'string') throw new CliError('the server answered 201 without a blob id');
    const local = formatBlobId(hasher.hex(), stat.size);
    if (hasher.hashed !== stat.size || id !== local) throw new CliError(`the server stored ${id} but ${file} hashes to ${local}`);
    return id;
  });
}
