// `svc get ID [-o FILE]`: the blob streamed to stdout or a file, resumed with a Range request
// after a dropped connection (and, for a file, from what an earlier run left in it), then
// checked against the id: SHA-256 and length, hashed as the bytes are written.

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { type Command, type Parsed, SERVER_OPTION, serverUrl, stringOption } from './args.js';
import { blobPath, parseBlobId } from './blob-id.js';
import { CliError, UsageError } from './errors.js';
import { rangeStream } from './file-range.js';
import { apiError, headerValue, request } from './http.js';
import { Progress } from './progress.js';
import { Backoff, retryNote } from './retry.js';

type Sink = (chunk: Buffer) => Promise<void>;

export const get: Command = {
  usage: `  svc get ID [-o FILE]
                   write the blob to stdout or FILE (resuming a partial FILE), checked against ID
`,
  options: { ...SERVER_OPTION, output: { type: 'string', short: 'o' } },
  run: getBlob,
};

async function getBlob(parsed: Parsed): Promise<number> {
  if (parsed.positionals.length !== 1) throw new UsageError('get needs exactly one blob ID');
  const server = serverUrl(parsed);
  const blob = parseBlobId(parsed.positionals[0]);
  const output = stringOption(parsed, 'output');
  const hash = createHash('sha256');
  let written = 0;
  let sink: Sink;
  let close = async () => {};

  if (output !== undefined) {
    let existing = 0;
    try {
      const stat = fs.statSync(output);
      if (!stat.isFile()) throw new CliError(`${output} is not a regular file`);
      existing = stat.size;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err instanceof CliError ? err : new CliError(`cannot use ${output}: ${(err as Error).message}`);
    }
    if (existing > blob.size) throw new CliError(`${output} has ${existing} bytes, more than the ${blob.size} of ${blob.id}; remove it to download again`);
    if (existing > 0) {
      for await (const chunk of rangeStream(output, 0, existing) as AsyncIterable<Buffer>) hash.update(chunk);
      written = existing;
      if (existing === blob.size) {
        check(hash.digest('hex'), blob.hex, output, existing);
        process.stderr.write(`svc get: ${output} is already complete and matches ${blob.id}\n`);
        return 0;
      }
      process.stderr.write(`svc get: resuming ${output} at byte ${existing} of ${blob.size}\n`);
    }
    let handle: fsp.FileHandle;
    try {
      handle = await fsp.open(output, 'a');
    } catch (err) {
      throw new CliError(`cannot write ${output}: ${(err as Error).message}`);
    }
    sink = async (chunk) => {
      for (let off = 0; off < chunk.length; ) off += (await handle.write(chunk, off, chunk.length - off)).bytesWritten;
    };
    close = () => handle.close();
  } else {
    sink = stdoutSink();
  }
  const resumedFrom = written;

  const progress = new Progress(`get ${blob.hex.slice(0, 12)}`, blob.size, written);
  const backoff = new Backoff((err, delay, attempt) => progress.note(retryNote(`svc get ${blob.id}`)(err, delay, attempt)));
  try {
    while (written < blob.size) {
      try {
        // If-Range: the rest of this very representation, else (never for a content address) all of it.
        const headers = written > 0 ? { Range: `bytes=${written}-`, 'If-Range': `"${blob.id}"` } : {};
        const reply = await request(server, blobPath(blob.id), { headers });
        let skip = 0;
        if (reply.status === 206) {
          const start = /^bytes ([0-9]+)-/.exec(headerValue(reply.headers, 'content-range') ?? '');
          if (!start || Number(start[1]) !== written) {
            reply.body.destroy();
            throw new CliError(`the server answered a range request for byte ${written} with Content-Range "${headerValue(reply.headers, 'content-range')}"`);
          }
        } else if (reply.status === 200) {
          skip = written; // the whole blob again: drop what we already have
        } else {
          throw await apiError(reply);
        }
        for await (let chunk of reply.body as AsyncIterable<Buffer>) {
          if (skip > 0) {
            const drop = Math.min(skip, chunk.length);
            skip -= drop;
            chunk = chunk.subarray(drop);
            if (chunk.length === 0) continue;
          }
          if (written + chunk.length > blob.size) throw new CliError(`the server sent more than the ${blob.size} bytes of ${blob.id}`);
          hash.update(chunk);
          await sink(chunk);
          written += chunk.length;
          progress.update(written);
          backoff.reset();
        }
        if (written < blob.size) throw Object.assign(new Error(`connection closed at byte ${written} of ${blob.size}`), { code: 'ECONNRESET' });
      } catch (err) {
        await backoff.wait(err);
      }
    }
  } catch (err) {
    progress.abort();
    throw err;
  } finally {
    await close();
  }
  progress.finish();
  check(hash.digest('hex'), blob.hex, output ?? 'the downloaded bytes', written, resumedFrom);
  return 0;
}

function check(hex: string, expected: string, what: string, size: number, resumedFrom = 0): void {
  if (hex === expected) return;
  const hint = resumedFrom > 0 ? ` (its first ${resumedFrom} bytes were there before this download: remove it and download again)` : '';
  throw new CliError(`${what} does not match the id: ${size} bytes with SHA-256 ${hex}, expected ${expected}${hint}`);
}

/** Writes to stdout with its backpressure; a closed pipe becomes a CliError. */
function stdoutSink(): Sink {
  let failed: Error | undefined;
  process.stdout.on('error', (err) => (failed = err));
  return async (chunk) => {
    const check = () => {
      if (failed) throw new CliError(`cannot write to stdout: ${failed.message}`);
    };
    check();
    if (!process.stdout.write(chunk)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          process.stdout.off('drain', done);
          process.stdout.off('error', done);
          resolve();
        };
        process.stdout.on('drain', done);
        process.stdout.on('error', done);
      });
    }
    check();
  };
}
