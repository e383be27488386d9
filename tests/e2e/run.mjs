#!/usr/bin/env node
// run.mjs - run the end-to-end suite with node's test runner, one file at a time (timing
// tests must not compete with each other), printing the spec report, then the plain line
// "e2e: N passed, N failed, N skipped". Exit status: 0 only when nothing failed and at least
// one test ran.
//
// Usage: node run.mjs [file.test.mjs ...]   (default: every *.test.mjs here)
// Environment: VESTIBULE_BIN (required), E2E_BACKEND, E2E_EXPECT_GRADE (see lib.mjs),
//              E2E_RESULTS=path: also write the counts there as JSON.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
let files = process.argv.slice(2);
if (files.length === 0) files = fs.readdirSync(here).filter((f) => f.endsWith('.test.mjs')).sort();
files = files.map((f) => path.resolve(here, f));

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'vst-e2e-run-'));
const counts = path.join(tmp, 'counts.json');
const r = spawnSync(process.execPath, [
    '--test', '--test-concurrency=1', '--test-timeout=1200000',
    '--test-reporter=spec', '--test-reporter-destination=stdout',
    `--test-reporter=${path.join(here, 'summary-reporter.mjs')}`, `--test-reporter-destination=${counts}`,
    ...files,
], { cwd: here, stdio: 'inherit' });

let c = { passed: 0, failed: 1, skipped: 0, failures: ['the test runner wrote no counts'] };
try { c = JSON.parse(fs.readFileSync(counts, 'utf8')); } catch { /* keep the failure */ }
fs.rmSync(tmp, { recursive: true, force: true });
if (r.status !== 0 && c.failed === 0) {
    c.failed = 1;
    c.failures.push(`node --test exited ${r.status ?? r.signal}`);
}
if (c.todo?.length) console.log(`\nknown gaps (todo):\n${c.todo.map((f) => `  ${f}`).join('\n')}`);
if (c.failures.length) console.log(`\nfailed:\n${c.failures.map((f) => `  ${f}`).join('\n')}`);
if (process.env.E2E_RESULTS) fs.writeFileSync(process.env.E2E_RESULTS, JSON.stringify(c) + '\n');
console.log(`e2e: ${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped`);
process.exit(c.failed === 0 && c.passed > 0 ? 0 : 1);
