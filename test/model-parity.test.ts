// Every bundle of MLeap's Spark parity suite (spark-parity.zip, a zip of 52 zips) over HTTP:
// it registers and transforms a generated sample, or it is refused naming the unsupported op.

import { createWriteStream, existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import yauzl from 'yauzl';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startServer, tempRoot, type TestServer } from './helpers/server.js';

const PARITY = fileURLToPath(new URL('../../shared/fixtures/mleap/combust-mleap-docs/assets/bundles/spark-parity.zip', import.meta.url));
const haveFixtures = existsSync(PARITY);
if (!haveFixtures) console.warn(`${PARITY} not found: the parity suite is skipped`);

/** Bundles refused because they use an op the runtime does not implement, with that op. */
const UNSUPPORTED: Record<string, string> = {
  'org.apache.spark.ml.parity.clustering.GaussianMixtureParitySpec': 'gaussian_mixture',
  'org.apache.spark.ml.parity.feature.BucketedRandomProjectionLSHParitySpec': 'bucketed_random_projection_lsh',
  'org.apache.spark.ml.parity.feature.MinHashLSHParitySpec': 'min_hash_lsh',
  'org.apache.spark.ml.parity.feature.WordToVectorParitySpec': 'word_to_vector',
};

async function extractAll(zipPath: string, dir: string): Promise<string[]> {
  mkdirSync(dir, { recursive: true });
  const zip = await new Promise<yauzl.ZipFile>((resolve, reject) =>
    yauzl.open(zipPath, { lazyEntries: true }, (err, z) => (err || !z ? reject(err) : resolve(z))),
  );
  const names: string[] = [];
  await new Promise<void>((resolve, reject) => {
    zip.on('error', reject);
    zip.on('end', resolve);
    zip.on('entry', (entry: yauzl.Entry) => {
      if (!entry.fileName.endsWith('.zip')) return zip.readEntry();
      const name = entry.fileName.split('/').pop()!;
      zip.openReadStream(entry, (err, stream) => {
        if (err || !stream) return reject(err);
        pipeline(stream, createWriteStream(join(dir, name))).then(() => {
          names.push(name);
          zip.readEntry();
        }, reject);
      });
    });
    zip.readEntry();
  });
  return names.sort();
}

describe.skipIf(!haveFixtures)('spark-parity bundles', () => {
  let server: TestServer;
  let bundles: string[] = [];
  const dir = tempRoot('svc-parity-');

  beforeAll(async () => {
    bundles = await extractAll(PARITY, dir);
    server = await startServer({ MODEL_WARMUP_ROWS: '5' });
  });

  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('52 bundles: each transforms a sample or is refused naming its op', async () => {
    expect(bundles).toHaveLength(52);
    const outcomes: string[] = [];
    for (const [i, file] of bundles.entries()) {
      const spec = file.replace(/\.zip$/, '');
      const name = `${i}-${spec.split('.').pop()!}`;
      const put = await fetch(`${server.modelUrl}/models/${name}`, { method: 'PUT', body: pathToFileURL(join(dir, file)).href });
      const body = (await put.json()) as { message?: string };
      const unsupported = UNSUPPORTED[spec];
      if (unsupported) {
        expect(put.status, spec).toBe(400);
        expect(body.message, spec).toContain(`unsupported op "${unsupported}"`);
        outcomes.push(`${name}: refused (${unsupported})`);
        continue;
      }
      expect(put.status, `${spec}: ${body.message}`).toBe(201);
      const sample = await (await fetch(`${server.modelUrl}/models/${name}/sample?nrow=3`)).json();
      const out = await fetch(`${server.modelUrl}/models/${name}/transform`, { method: 'POST', body: JSON.stringify(sample) });
      const frame = (await out.json()) as { rows: unknown[][]; message?: string };
      expect(out.status, `${spec}: ${frame.message}`).toBe(200);
      expect(frame.rows, spec).toHaveLength(3);
      outcomes.push(`${name}: transforms`);
    }
    expect(outcomes.filter((o) => o.endsWith('transforms'))).toHaveLength(48);
  });
});
