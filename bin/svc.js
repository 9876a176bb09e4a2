#!/usr/bin/env node
import('../dist/server/main.js').then((m) => m.main(process.argv.slice(2)));
