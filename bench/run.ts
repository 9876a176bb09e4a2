/**
 * End-to-end benchmark of the blob API: starts the real server (dist/server/main.js) on a free
 * port with a fresh data directory, measures large-blob ingest/download against same-run
 * SHA-256, 4 KiB request rates and PDF-revision dedup, then prints a Markdown report and writes
 * bench/results/<timestamp>.json and bench/results/latest.md.
 *
 *   npm run bench                 1 GiB body, 5 s upload / 10 s download load phases
 *   npm run bench -- --quick      256 MiB body, 2 s load phases
 *   npm run bench -- --strict     SVC_DURABILITY=strict (default: relaxed)
 *   npm run bench -- --models-only   only the model runtime scenario (bench/models.ts)
 *   npm run bench -- --resumable-only   only the resumable-upload scenario (bench/resumable.ts)
 *   npm run bench -- --documents-only   only the document platform scenario (bench/documents.ts)
 *   npm run bench -- --peers-only   only svc against nginx (bench/peers-nginx.ts; skipped when nginx is absent)
 *   npm run bench -- --no-wrk     the Node generator for the 4 KiB cells even when wrk is installed
 *   npm run bench -- --docs | --no-docs   write (or not) the generated block of docs/performance.md
 *                                 and docs/perf/*.svg; by default only a full relaxed run with every
 *                                 scenario writes them, every other run writes its charts to
 *                                 bench/results/<timestamp>-charts/
 *   npm run bench:ops             garbage collection at 1M blocks and idle SSE subscribers (bench/gc-ops.ts,
 *                                 ~7.5 min, not part of a full run)
 *
 * Right after the body file is written, every full (and --quick) run measures the machine's limits on
 * it (bench/limits.ts, issue 7): `openssl dgst -sha256` and node:crypto SHA-256 on the same bytes,
 * and `dd` writes with and without fdatasync next to the server's data directory.
 *
 * After the blob scenarios, every run measures resumable uploads (issue 4): a 1 GiB file (256 MiB
 * with --quick) as one session of 8 MiB parts to svc and to the tus reference server
 * (bench/tus-server.ts), alternating, 3 rounds each (1 with --quick). Then the document platform
 * (issue 5): documents created per second (create + 64 KiB bytes + finalize) at 8/16/32 clients
 * against 64 KiB blob uploads in the same loop, canonical metadata writes and metadata reads over
 * a pool of 200 documents (shorter windows with --quick). It ends with the model
 * runtime scenario (issue 3): the airbnb MLeap bundle on the model listener, transform at
 * 1 / 100 / 10,000 rows in seq, par and par-2, and rank. After the bench's server has stopped,
 * svc against nginx (issue 7; bench/peers-nginx.ts, its own svc and nginx): 4 KiB objects at
 * 1/8/32 connections, 1 MiB at 1/8, 1 GiB on one, downloads and uploads, 3 rounds (--quick: a
 * smaller matrix, 256 MiB, 1 round); skipped with an install hint when nginx is not installed.
 *
 * Load generators: the nginx scenario's 4 KiB and 1 MiB cells use wrk (bench/wrk.ts) when installed
 * (else the Node generator, with `wrk not installed: apt-get install wrk (Debian)`); everything
 * else uses the built-in one (bench/load.ts, one Node.js thread). Every scenario reports the
 * generator's CPU next to the server's ("bench CPU": process.cpuUsage, or wrk's /proc ticks).
 *
 * Output: bench/results/<timestamp>.json (every round's raw samples, machine, versions),
 * bench/results/latest.md, and the charts (bench/charts.ts). A full run also rewrites the
 * generated block of docs/performance.md and docs/perf/*.svg (bench/harness-report.ts).
 *
 * Other SVC_* variables in the environment are passed to the server unchanged; the model
 * listener always gets a free port (HTTP_PORT=0).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchArgs } from './args.js';
import { runDedup } from './dedup.js';
import { type DocumentsResult, documentsFailure, renderDocumentsReport, renderDocumentsSection, runDocuments } from './documents.js';
import { type LargeUploadResult, downloadBlob, measureSha256, uploadFile, writeRandomFile } from './large.js';
import { runLoad } from './load.js';
import { type LimitsResult, renderLimitsSection, runLimits } from './limits.js';
import { type ModelsResult, renderModelsReport, renderModelsSection, runModels } from './models.js';
import { type HarnessResults, buildCharts, renderGeneratedBlock, replaceGeneratedBlock, writeCharts } from './harness-report.js';
import { type NginxPeersResult, renderNginxPeersSection, runNginxPeers } from './peers-nginx.js';
import { RawConnection, getRequest, postRequest } from './raw-http.js';
import { type Results, evaluateTargets, machineEnvironment, renderErrors, renderHeader, renderMarkdown } from './report.js';
import { type ResumableResult, renderResumableReport, renderResumableSection, runResumable } from './resumable.js';
import { ServerProcess } from './server-process.js';
import { freePort } from './host.js';
import { WRK_INSTALL_HINT, findWrk } from './wrk.js';

/** Thrown to leave the server part of a run that needs no bench server (--peers-only). */
class SkipServer extends Error {}

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const SEED = 'svc-bench-v1';
const SERVER_ENTRY = path.join(REPO, 'dist', 'server', 'main.js');
/** Large ingests per run; the median is the figure (single uploads here vary by tens of percent). */
const INGEST_ROUNDS = 3;

interface Options {
  quick: boolean;
  strict: boolean;
  modelsOnly: boolean;
  resumableOnly: boolean;
  documentsOnly: boolean;
  peersOnly: boolean;
  noWrk: boolean;
  /** auto: only a full relaxed run with every scenario writes docs/performance.md's block and docs/perf/. */
  docs: 'auto' | 'yes' | 'no';
}

function parseOptions(): Options {
  const args = benchArgs({
    usage: 'usage: node dist/bench/run.js [--quick] [--strict] [--models-only | --resumable-only | --documents-only | --peers-only] [--no-wrk] [--docs | --no-docs]',
    options: {
      quick: { type: 'boolean', help: '256 MiB bodies, shorter load phases and document cells, 1 round of each comparison, a smaller nginx matrix' },
      strict: { type: 'boolean', help: 'SVC_DURABILITY=strict (default: relaxed)' },
      'models-only': { type: 'boolean', help: 'only the model runtime scenario (bench/models.ts)' },
      'resumable-only': { type: 'boolean', help: 'only the resumable-upload scenario, svc vs tus (bench/resumable.ts)' },
      'documents-only': { type: 'boolean', help: 'only the document platform scenario: documents/s, metadata writes and reads (bench/documents.ts)' },
      'peers-only': { type: 'boolean', help: 'only svc against nginx: 4 KiB / 1 MiB / 1 GiB downloads and uploads (bench/peers-nginx.ts; skipped when nginx is absent)' },
      'no-wrk': { type: 'boolean', help: "the built-in Node generator for the nginx scenario's 4 KiB cells even when wrk is installed" },
      docs: { type: 'boolean', help: "write docs/performance.md's generated block and docs/perf/*.svg (default: only a full relaxed run does)" },
      'no-docs': { type: 'boolean', help: 'do not write them' },
    },
  });
  const v = args.values;
  const opts: Options = {
    quick: v.quick, strict: v.strict, modelsOnly: v['models-only'], resumableOnly: v['resumable-only'], documentsOnly: v['documents-only'],
    peersOnly: v['peers-only'], noWrk: v['no-wrk'], docs: v.docs ? 'yes' : v['no-docs'] ? 'no' : 'auto',
  };
  if ([opts.modelsOnly, opts.resumableOnly, opts.documentsOnly, opts.peersOnly].filter(Boolean).length > 1) {
    args.fail('--models-only, --resumable-only, --documents-only and --peers-only exclude each other (a full run has them all)');
  }
  if (v.docs && v['no-docs']) args.fail('--docs and --no-docs exclude each other');
  return opts;
}

/** Does the server still answer? For error reports. */
async function probe(port: number): Promise<string> {
  try {
    const res = await RawConnection.requestOnce(port, getRequest('/api/health/live'), 3000);
    return `GET /api/health/live on a new connection answered HTTP ${res.status}`;
  } catch (err) {
    return `GET /api/health/live on a new connection failed: ${err instanceof Error ? err.message : String(err)}`;
  }
}

/** The document section of a run whose scenario failed before it had a result. */
function documentsNotRun(quick: boolean, durability: 'strict' | 'relaxed'): DocumentsResult {
  return {
    skipped: 'the scenario did not run (see Errors)', durability, quick, settings: { warmupMs: 0, storeWarmupMs: 0, createMs: 0, writeMs: 0, readMs: 0 }, documentBytes: 64 * 1024,
    schemaUrn: '', documents: [], blobs: [], poolSize: 0, writes: [], reads: [], totalErrors: 0, targets: [],
  };
}

/** The resumable section of a run whose scenario failed before it had a result. */
function notRun(bodyBytes: number, durability: 'strict' | 'relaxed'): ResumableResult {
  return { skipped: 'the scenario did not run (see Errors)', bodyBytes, partBytes: 8 * MiB, rounds: 0, durability, roundFiles: [], runs: [], tusProblems: [], targets: [] };
}

/** The nginx section of a run whose scenario failed before it had a result. */
function peersNotRun(r: Results): NginxPeersResult {
  return {
    tool: 'svc-bench-peers-nginx', startedAt: r.startedAt, mode: r.mode, skipped: 'the scenario did not run (see Errors)', environment: machineEnvironment(REPO),
    durability: { svc: 'relaxed', nginx: 'n/a' }, settings: { largeBytes: 0, rounds: 0, warmupSeconds: 0, durationSeconds: 0, objects: 0, matrix: [] },
    generatorCheck: [], largeDownloads: [], largeUploads: [], runs: [], comparisons: [], errors: [], targets: [],
  };
}

/** The report of a --peers-only run (the scenario starts its own svc and nginx: no bench server section). */
function renderPeersReport(r: Results, p: NginxPeersResult): string {
  const L = renderHeader(r, `svc benchmark: svc against nginx only (--peers-only${r.mode === 'quick' ? ', --quick' : ''})`, r.startedAt, [
    `- Load generator: ${r.environment.loadGenerator}; server and load generator share the host's CPUs`,
  ]);
  L.push(...renderErrors(r), renderNginxPeersSection(p));
  return L.join('\n');
}

const progress = (msg: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

async function main(): Promise<void> {
  const opts = parseOptions();
  const bodyBytes = opts.quick ? 256 * MiB : GiB;
  const uploadMs = opts.quick ? 2000 : 5000;
  const downloadMs = opts.quick ? 2000 : 10_000;
  const warmupMs = opts.quick ? 500 : 1000;
  const largeTimeoutMs = 10 * 60_000;
  const durability = opts.strict ? 'strict' : 'relaxed';
  const only = opts.modelsOnly || opts.resumableOnly || opts.documentsOnly || opts.peersOnly;
  const blobs = !only;
  const limits = !only;
  const models = !only || opts.modelsOnly;
  const resumable = !only || opts.resumableOnly;
  const documents = !only || opts.documentsOnly;
  const peers = !only || opts.peersOnly;
  // The scenarios that use the bench's own server (the nginx scenario starts its own svc).
  const needServer = blobs || models || resumable || documents;

  const wrk = findWrk();
  const results: HarnessResults & { documents?: DocumentsResult; models?: ModelsResult } = {
    scenarios: [...(limits ? ['limits'] : []), ...(blobs ? ['blobs'] : []), ...(resumable ? ['resumable'] : []), ...(documents ? ['documents'] : []), ...(models ? ['models'] : []), ...(peers ? ['peers-nginx'] : [])],
    tool: 'svc-bench',
    startedAt: new Date().toISOString(),
    mode: opts.quick ? 'quick' : 'full',
    durability,
    bodyBytes,
    loadSeconds: { uploads: uploadMs / 1000, downloads: downloadMs / 1000, warmup: warmupMs / 1000 },
    environment: {
      ...machineEnvironment(REPO),
      loadGenerator: `${peers ? `svc vs nginx 4 KiB and 1 MiB cells: ${wrk && !opts.noWrk ? `wrk (${wrk.version}, one thread; its CPU from /proc)` : `built-in (${wrk ? '--no-wrk' : WRK_INSTALL_HINT})`}; everything else: ` : ''}built-in (bench/load.ts): raw keep-alive HTTP/1.1 sockets, one Node.js thread; its own CPU use is reported as "bench CPU" (process.cpuUsage) in every scenario`,
    },
    server: { problems: [] },
    errors: [],
    targets: [],
  };

  const tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-'));
  const fsRoot = path.join(tmp, 'data');
  const bodyFile = path.join(tmp, 'body.bin');
  mkdirSync(fsRoot);
  let server: ServerProcess | undefined;
  let roundServer: ServerProcess | undefined;
  const emergencyCleanup = () => {
    server?.kill();
    roundServer?.kill();
    rmSync(tmp, { recursive: true, force: true });
  };
  process.once('exit', emergencyCleanup);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      progress(`${sig}: stopping the server and removing ${tmp}`);
      emergencyCleanup();
      process.exit(130);
    });
  }

  /** Runs a phase; records its failure and carries on unless the server is gone. */
  const phase = async (name: string, fn: () => Promise<void> | void): Promise<boolean> => {
    progress(name);
    try {
      await fn();
      return true;
    } catch (err) {
      let message = err instanceof Error ? err.message : String(err);
      await new Promise((r) => setTimeout(r, 200)); // let a server exit be noticed before judging
      if (server && !server.alive && !message.includes('server exited')) message += `; ${server.describeExit()}`;
      else if (server) message += `; afterwards ${await probe(server.port)}`;
      results.errors.push({ phase: name, message });
      progress(`${name} FAILED: ${message}`);
      return false;
    }
  };

  try {
    if (blobs) await phase(`generating ${bodyBytes / MiB} MiB of deterministic random bytes in ${bodyFile}`, () => writeRandomFile(bodyFile, bodyBytes, SEED));
    if (blobs) await phase('SHA-256 reference rate', () => {
      results.sha256 = measureSha256(bodyFile);
    });
    if (limits) await phase(`machine limits: openssl and node:crypto SHA-256 of the body, dd of ${bodyBytes / MiB} MiB with and without fdatasync`, async () => {
      // dd writes next to the server's data directory (same disk and file system).
      results.limits = await runLimits({ file: bodyFile, diskDir: tmp, ddMiB: bodyBytes / MiB, progress });
      if (results.limits.errors.length) throw new Error(results.limits.errors.map((e) => `${e.phase}: ${e.message}`).join('; '));
    });

    if (!needServer) throw new SkipServer();
    progress(`starting the server (SVC_DURABILITY=${durability}, SVC_FS_ROOT=${fsRoot})`);
    // The model listener defaults to 8080; a bench server must not take (or collide on) it. Its
    // port is read from the `listening` log line, or chosen here when the log level hides it.
    const quietLog = ['warn', 'error', 'silent'].includes(process.env.SVC_LOG_LEVEL ?? '');
    const chosenModelPort = quietLog ? await freePort() : undefined;
    process.env.HTTP_PORT = String(chosenModelPort ?? 0);
    server = await ServerProcess.start({ entry: SERVER_ENTRY, fsRoot, durability });
    results.server.workers = server.listeningLog?.workers;
    results.server.baselineRssBytes = server.memoryField('VmRSS');
    const s = server;
    const port = s.port;
    progress(`server pid ${s.pid} listening on port ${port}`);

    let largeId: string | undefined;
    if (blobs) await phase(`ingest of ${bodyBytes / MiB} MiB, ${INGEST_ROUNDS} rounds`, async () => {
      // Round 1 stores the blob in the bench server (the download phases read it); every other
      // round gets a server of its own on a fresh data directory, so each stores every block as
      // new. Those directories stay until the run ends: deleting a store's files right before the
      // next round slows its file creation (docs/performance.md, ext4 without a journal).
      const rounds: LargeUploadResult[] = [];
      for (let k = 0; k < INGEST_ROUNDS; k++) {
        let target = s;
        if (k > 0) {
          const roundRoot = path.join(tmp, `ingest-round-${k + 1}`);
          mkdirSync(roundRoot);
          // Its model listener on a free port too: the bench server's may be a fixed one.
          target = roundServer = await ServerProcess.start({ entry: SERVER_ENTRY, fsRoot: roundRoot, durability, env: { HTTP_PORT: '0' } });
        }
        try {
          const up = await uploadFile(target, bodyFile, bodyBytes, 'application/octet-stream', largeTimeoutMs);
          if (up.response.blob.size !== bodyBytes) throw new Error(`server stored ${up.response.blob.size} bytes, sent ${bodyBytes}`);
          if (k === 0) largeId = up.response.blob.id;
          rounds.push(up);
          progress(`  round ${k + 1}: ${Math.round(up.mbPerSecond)} MB/s, server CPU ${Math.round(up.cpu.serverPercent ?? NaN)}%, RSS +${(up.rss.growthBytes / MiB).toFixed(1)} MiB`);
        } finally {
          if (target !== s) await target.stop();
          roundServer = undefined;
        }
      }
      const mid = [...rounds].sort((a, b) => a.mbPerSecond - b.mbPerSecond)[rounds.length >> 1];
      const sha = results.sha256;
      results.ingest = {
        ...mid,
        ratioToSha256: sha ? mid.mbPerSecond / sha.mbPerSecond : undefined,
        idMatchesSha256: sha ? rounds.every((r) => r.response.blob.id === `sha-256:${sha.hex}:${bodyBytes}`) : undefined,
        rounds: rounds.map((r) => ({ mbPerSecond: r.mbPerSecond, seconds: r.seconds, serverPercent: r.cpu.serverPercent, rssGrowthBytes: r.rss.growthBytes })),
      };
    });

    if (blobs && largeId && s.alive) {
      const id = largeId;
      await phase(`download of ${bodyBytes / MiB} MiB (3 passes)`, async () => {
        const passes = [];
        for (let i = 0; i < 3; i++) {
          const d = await downloadBlob(s, id, largeTimeoutMs);
          if (d.bytes !== bodyBytes) throw new Error(`download returned ${d.bytes} bytes, expected ${bodyBytes}`);
          passes.push(d);
        }
        // The median pass is the result; all passes are kept in the JSON.
        const sorted = [...passes].sort((a, b) => a.mbPerSecond - b.mbPerSecond);
        results.download = { ...sorted[1], passesMbPerSecond: passes.map((p) => p.mbPerSecond) };
      });
    }

    const smallIds: string[] = [];
    if (blobs && s.alive) {
      await phase('4 KiB uploads', async () => {
        const r = await runLoad({
          port,
          connections: 16,
          pipeline: 1,
          warmupMs,
          durationMs: uploadMs,
          next: () => postRequest('/api/v1/blobs', 'application/octet-stream', randomBytes(4096)),
          expectStatus: 201,
          keepBody: true,
          onOk: (res) => {
            if (smallIds.length < 16) smallIds.push((JSON.parse(res.body!.toString('utf8')) as { blob: { id: string } }).blob.id);
          },
          server: s,
        });
        results.smallUploads = { ...r, bodyBytes4k: 4096 };
      });
    }

    if (blobs && s.alive) {
      await phase('4 KiB downloads', async () => {
        // A few stored 4 KiB blobs; upload them here if the upload phase produced none.
        while (smallIds.length < 8) {
          const res = await RawConnection.requestOnce(port, postRequest('/api/v1/blobs', 'application/octet-stream', randomBytes(4096)), 60_000);
          if (res.status !== 201) throw new Error(`seeding a 4 KiB blob answered HTTP ${res.status}: ${res.body?.toString('utf8').slice(0, 300)}`);
          smallIds.push((JSON.parse(res.body!.toString('utf8')) as { blob: { id: string } }).blob.id);
        }
        const ids = smallIds.slice(0, 8);
        const requests = ids.map((id) => getRequest(`/api/v1/blobs/${id}`));
        results.smallDownloads = [];
        // 64 requests in flight either way: 64 plain keep-alive connections, or 16 pipelining 4 each.
        for (const [connections, pipeline] of [
          [64, 1],
          [16, 4],
        ] as const) {
          let seq = 0;
          const r = await runLoad({
            port,
            connections,
            pipeline,
            warmupMs,
            durationMs: downloadMs,
            next: () => requests[seq++ % requests.length],
            expectStatus: 200,
            server: s,
          });
          const label = pipeline === 1 ? `${connections} keep-alive connections` : `${connections} connections, ${pipeline} pipelined each`;
          results.smallDownloads.push({ ...r, label, blobs: ids.length });
          if (r.bodyBytes !== r.requests * 4096 && r.errors === 0) throw new Error(`downloads returned ${r.bodyBytes} body bytes for ${r.requests} requests`);
        }
      });
    }

    if (blobs && s.alive) {
      await phase('PDF revision dedup', async () => {
        results.dedup = await runDedup(port, SEED, 5, 64 * MiB);
      });
    }

    if (resumable && s.alive) {
      // The blob scenario's file (already stored by the ingest above) is sent once more as a
      // resumable session after the rounds: the dedup case, reported apart from the comparison.
      const stored = results.ingest?.idMatchesSha256 && results.sha256 ? { file: bodyFile, sha256Hex: results.sha256.hex } : undefined;
      await phase(`resumable uploads of ${bodyBytes / MiB} MiB, svc vs tus`, async () => {
        results.resumable = await runResumable({ repo: REPO, server: s, durability, tmp, bodyBytes, rounds: opts.quick ? 1 : 3, seed: SEED, storedFile: stored, progress });
        if (results.resumable.error) throw new Error(results.resumable.error);
      });
    }
    rmSync(bodyFile, { force: true });

    if (documents && s.alive) {
      await phase('document platform: documents/s, metadata writes and reads', async () => {
        results.documents = await runDocuments({ server: s, durability, quick: opts.quick, progress });
        const failure = documentsFailure(results.documents);
        if (failure) throw new Error(failure);
      });
    }

    if (models && s.alive) {
      await phase('model runtime (airbnb bundle)', async () => {
        for (let i = 0; i < 200 && chosenModelPort === undefined && typeof s.listeningLog?.modelPort !== 'number'; i++) await new Promise((r) => setTimeout(r, 10));
        const modelPort = chosenModelPort ?? s.listeningLog?.modelPort;
        if (typeof modelPort !== 'number') throw new Error('the server logged no modelPort in its "listening" line');
        results.models = await runModels({ repo: REPO, server: s, modelPort, quick: opts.quick, progress });
      });
    }
  } catch (err) {
    if (!(err instanceof SkipServer)) {
      results.errors.push({ phase: 'harness', message: err instanceof Error ? err.message : String(err) });
      progress(`FAILED: ${err instanceof Error ? err.stack : String(err)}`);
    }
  } finally {
    if (server) {
      progress('stopping the server');
      const exit = await server.stop();
      results.server.exit = { graceful: exit.graceful, alreadyExited: exit.alreadyExited, code: exit.code, signal: exit.signal };
      results.server.problems = server.problems;
    }
    rmSync(tmp, { recursive: true, force: true });
    process.off('exit', emergencyCleanup);
  }

  // svc against nginx: its own svc and nginx, after the bench's server has stopped.
  if (peers) {
    const name = `svc against nginx (${opts.quick ? '4 KiB / 1 MiB / 256 MiB, 1 round' : '4 KiB / 1 MiB / 1 GiB, 3 rounds'})`;
    progress(name);
    try {
      results.peersNginx = await runNginxPeers({ repo: REPO, quick: opts.quick, noWrk: opts.noWrk, progress });
      for (const e of results.peersNginx.errors) results.errors.push({ phase: `svc against nginx: ${e.phase}`, message: e.message });
      if (!needServer) results.server.workers = results.peersNginx.svc?.workers;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      results.errors.push({ phase: name, message });
      progress(`${name} FAILED: ${message}`);
    }
  }
  if (results.limits) {
    const figures: NonNullable<LimitsResult['svcFigures']> = [];
    if (results.ingest) figures.push({ name: `Ingest of ${bodyBytes / MiB} MiB (blob scenario, median of ${results.ingest.rounds.length} POSTs)`, mbPerSecond: results.ingest.mbPerSecond, durability });
    const up = results.peersNginx?.comparisons.find((c) => c.key === 'upload-large');
    if (up) figures.push({ name: `Upload of ${(results.peersNginx?.settings.largeBytes ?? 0) / MiB} MiB (nginx scenario, median; nginx ${Math.round(up.nginxMedian)} MB/s)`, mbPerSecond: up.svcMedian, durability: 'relaxed' });
    results.limits.svcFigures = figures;
  }

  results.finishedAt = new Date().toISOString();
  const modelTargets = results.models?.targets ?? [];
  const resumableTargets = results.resumable?.targets ?? [];
  const documentTargets = results.documents?.targets ?? [];
  const peerTargets = results.peersNginx?.targets ?? [];
  results.targets = [...(blobs ? evaluateTargets(results) : []), ...resumableTargets, ...documentTargets, ...modelTargets, ...peerTargets];
  let markdown: string;
  if (opts.modelsOnly) markdown = renderModelsReport(results, results.models ?? { skipped: 'the scenario did not run (see Errors)', cells: [], rank: [], targets: [] });
  else if (opts.resumableOnly) markdown = renderResumableReport(results, results.resumable ?? notRun(bodyBytes, durability));
  else if (opts.documentsOnly) markdown = renderDocumentsReport(results, results.documents ?? documentsNotRun(opts.quick, durability));
  else if (opts.peersOnly) markdown = renderPeersReport(results, results.peersNginx ?? peersNotRun(results));
  else markdown = `${renderMarkdown(results)}\n${results.limits ? renderLimitsSection(results.limits) : ''}\n${results.resumable ? renderResumableSection(results.resumable) : ''}\n${results.documents ? renderDocumentsSection(results.documents) : ''}\n${results.models ? renderModelsSection(results.models) : ''}\n${results.peersNginx ? renderNginxPeersSection(results.peersNginx) : ''}`;
  const outDir = path.join(REPO, 'bench', 'results');
  mkdirSync(outDir, { recursive: true });
  const stamp = results.startedAt.replace(/:/g, '-');
  const jsonFile = path.join(outDir, `${stamp}.json`);

  // Charts and docs/performance.md's generated block: a full relaxed run with every scenario
  // writes them into docs/ (or any run with --docs); other runs keep their charts next to the JSON.
  const writeDocs = opts.docs === 'yes' || (opts.docs === 'auto' && !opts.quick && !only && !opts.strict);
  const charts = buildCharts(results);
  const docFile = path.join(REPO, 'docs', 'performance.md');
  results.outputs = { charts: [] };
  try {
    const chartDir = writeDocs ? path.join(REPO, 'docs', 'perf') : path.join(outDir, `${stamp}-charts`);
    if (charts.length) results.outputs.charts = writeCharts(chartDir, charts).map((x) => path.relative(REPO, x));
    if (writeDocs) {
      const block = renderGeneratedBlock(results, charts, 'perf');
      writeFileSync(docFile, replaceGeneratedBlock(readFileSync(docFile, 'utf8'), block));
      results.outputs.docs = path.relative(REPO, docFile);
    }
  } catch (err) {
    results.errors.push({ phase: 'charts and docs/performance.md', message: err instanceof Error ? err.message : String(err) });
  }
  if (results.outputs.charts.length) markdown += `\n## Charts\n\n${results.outputs.charts.map((c) => `- ${c}`).join('\n')}\n`;
  writeFileSync(jsonFile, `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(path.join(outDir, 'latest.md'), markdown);
  process.stdout.write(markdown);
  progress(`wrote ${path.relative(REPO, jsonFile)}, bench/results/latest.md${results.outputs.charts.length ? `, ${results.outputs.charts.length} charts in ${path.dirname(results.outputs.charts[0])}` : ''}${results.outputs.docs ? ` and the generated block of ${results.outputs.docs}` : ''}`);
  if (results.errors.length > 0) process.exitCode = 1;
}

await main();
