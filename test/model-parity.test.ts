// Every bundle of MLeap's Spark parity suite (spark-parity.zip, a zip of 52 zips) over HTTP:
// it registers, is described, and transforms a generated sample, or it is refused naming the
// unsupported op. Every answer is checked against server/openapi/model-runtime.json (`modelFetch`).

import { existsSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PARITY_ZIP, extractInnerZips } from './helpers/models.js';
import { modelFetch } from './helpers/openapi.js';
import { startServer, tempRoot, type TestServer } from './helpers/server.js';

const PARITY = PARITY_ZIP;
const haveFixtures = existsSync(PARITY);
if (!haveFixtures) console.warn(`${PARITY} not found: the parity suite is skipped`);

/** Bundles refused because they use an op the runtime does not implement, with that op. */
const UNSUPPORTED: Record<string, string> = {
  'org.apache.spark.ml.parity.clustering.GaussianMixtureParitySpec': 'gaussian_mixture',
  'org.apache.spark.ml.parity.feature.BucketedRandomProjectionLSHParitySpec': 'bucketed_random_projection_lsh',
  'org.apache.spark.ml.parity.feature.MinHashLSHParitySpec': 'min_hash_lsh',
  'org.apache.spark.ml.parity.feature.WordToVectorParitySpec': 'word_to_vector',
};

describe.skipIf(!haveFixtures)('spark-parity bundles', () => {
  let server: TestServer;
  let bundles: string[] = [];
  const dir = tempRoot('svc-parity-');

  beforeAll(async () => {
    bundles = (await extractInnerZips(PARITY, dir)).map((path) => basename(path));
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
      const put = await modelFetch(`${server.modelUrl}/models/${name}`, { method: 'PUT', body: pathToFileURL(join(dir, file)).href });
      const body = (await put.json()) as { message?: string };
      const unsupported = UNSUPPORTED[spec];
      if (unsupported) {
        expect(put.status, spec).toBe(400);
        expect(body.message, spec).toContain(`unsupported op "${unsupported}"`);
        outcomes.push(`${name}: refused (${unsupported})`);
        continue;
      }
      expect(put.status, `${spec}: ${body.message}`).toBe(201);
      // Its bundle info and schemas (every field type these bundles use) as the document describes them.
      const described = await modelFetch(`${server.modelUrl}/models/${name}`);
      expect([spec, described.status]).toEqual([spec, 200]);
      await described.arrayBuffer();
      const sample = await (await modelFetch(`${server.modelUrl}/models/${name}/sample?nrow=3`)).json();
      const out = await modelFetch(`${server.modelUrl}/models/${name}/transform`, { method: 'POST', body: JSON.stringify(sample) });
      const frame = (await out.json()) as { rows: unknown[][]; message?: string };
      expect(out.status, `${spec}: ${frame.message}`).toBe(200);
      expect(frame.rows, spec).toHaveLength(3);
      outcomes.push(`${name}: transforms`);
    }
    expect(outcomes.filter((o) => o.endsWith('transforms'))).toHaveLength(48);
  });
});
