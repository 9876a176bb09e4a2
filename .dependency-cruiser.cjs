// The layering rules of docs/architecture.md ("Layers and rules"), checked in `npm test` by
// test/layering.test.ts through dependency-cruiser's API. The sources are TypeScript 7, which
// dependency-cruiser cannot load, so it parses them with swc (`parser: 'swc'`); type-only imports
// count like any other (a circle of types is a circle).
const fs = require('node:fs');
const path = require('node:path');

/** The folders of TypeScript sources (tsconfig.json `include`): what is cruised. */
const SOURCE_ROOTS = ['engine', 'server', 'workers', 'native-bench', 'bench', 'cli', 'native'];
const IN_REPO = `^(${SOURCE_ROOTS.join('|')})/`;

/**
 * The foundation every layer may use, that uses nothing of the repo outside itself: engine/base/
 * (with the error catalogue, the configuration, the log and the version).
 */
const FOUNDATION = '^engine/base/';

/** Modules started by a file path rather than imported: Piscina and worker_threads load these. */
const LOADED_BY_PATH = [
  'workers/ingest.ts', // engine/engine.ts WORKER_MODULE
  'workers/scanner.ts', // engine/engine.ts SCANNER_MODULE (a worker_threads Worker)
  'workers/model.ts', // engine/models/service.ts WORKER_MODULE
  'workers/views.ts', // engine/views/views.ts VIEW_TASKS_MODULE (job tasks)
  'workers/docs-jobs.ts', // engine/documents/doc-jobs.ts DOC_JOBS_MODULE (job tasks)
  'engine/jobs/task-runner.ts', // engine/jobs/queue.ts RUNNER: runs a job's task module in the pool
  'bench/job-noop.ts', // bench/job-pickup.ts: a task module for the job queue
];

/** Programs: run by node directly (bin/svc.js, scripts/build.mjs, benchmarks, tests). */
const PROGRAMS = [
  'server/main.ts', // bin/svc.js, test/helpers/server.ts
  'native/build.ts', // scripts/build.mjs
  'native/uws-error-pages.ts', // scripts/build.mjs
  'bench/tus-server.ts', // bench/tus-clients.ts, bench/resumable.ts: the reference tus server
  'bench/postgres-server.ts', // test/postgres-harness.test.ts
  'bench/run.ts', // bench/node-versions.ts runs it under each Node
  // Benchmarks run as `node dist/bench/<name>.js` (docs/performance.md or their own header):
  'bench/pg-catalog.ts',
  'bench/pg-s3-holdings.ts',
  'bench/s3-layout.ts',
  'bench/units.ts',
  'bench/pg-statement-cost.ts',
  'bench/job-pickup.ts',
];

/** Modules written ahead of what imports them: the roots of what they import. */
const NOT_YET_WIRED = [];

/** Every `node dist/<file>.js` of package.json's scripts (the benchmarks) is a program too. */
function scriptPrograms(repo) {
  const { scripts } = JSON.parse(fs.readFileSync(path.join(repo, 'package.json'), 'utf8'));
  const found = [];
  for (const command of Object.values(scripts)) {
    for (const [, file] of command.matchAll(/node dist\/(\S+)\.js/g)) found.push(`${file}.ts`);
  }
  return found;
}

const escape = (file) => `^${file.replace(/[.]/g, '\\.')}$`;

/** The rules and options for the tree at `repo`; entry points are read from its package.json. */
function layering(repo = __dirname) {
  const entries = [...new Set([...LOADED_BY_PATH, ...PROGRAMS, ...NOT_YET_WIRED, ...scriptPrograms(repo)])];
  return {
    forbidden: [
      {
        name: 'engine-not-above',
        severity: 'error',
        comment: 'engine/ knows nothing of HTTP, the CLI, workers or benchmarks: they use it, never the other way',
        from: { path: '^engine/' },
        to: { path: '^(server|cli|workers|bench|native-bench)/' },
      },
      {
        name: 'foundation-imports-foundation',
        severity: 'error',
        comment: 'engine/base uses nothing of the repo above it',
        from: { path: FOUNDATION },
        to: { path: IN_REPO, pathNot: FOUNDATION },
      },
      {
        name: 'no-circular',
        severity: 'error',
        comment: 'no import circle, type-only imports included',
        from: {},
        to: { circular: true },
      },
      {
        name: 'no-orphans',
        severity: 'error',
        comment:
          'every source module is reachable from an entry point (a program, or a module loaded by file path); ' +
          'a new one of those goes into .dependency-cruiser.cjs',
        from: { path: entries.map(escape) },
        to: { path: IN_REPO, pathNot: entries.map(escape), reachable: false },
      },
    ],
    options: {
      parser: 'swc',
      includeOnly: IN_REPO, // npm packages and node builtins are allowed everywhere: not followed, not resolved
      tsPreCompilationDeps: true,
      skipAnalysisNotInRules: true,
      moduleSystems: ['es6', 'cjs'],
    },
  };
}

// The rules for this tree, as the depcruise command reads them (`npx depcruise --config
// .dependency-cruiser.cjs engine server …`); the test reads `layering` and `SOURCE_ROOTS` as well
// (not enumerable: not part of the configuration depcruise validates).
module.exports = Object.defineProperties(layering(), {
  layering: { value: layering },
  SOURCE_ROOTS: { value: SOURCE_ROOTS },
});
