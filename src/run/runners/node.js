// Vestibule session runner for node: one persistent context (this process's global, through
// the vm module) with top-level await, rewritten as node's own REPL does it
// (internal/repl/await, so the runner starts with --expose-internals); see
// docs/design/sessions.md. Cells arrive on fd 4 as "<seq> <length>\n" + code; after each,
// one record "<seq> <kind> <code>\n" goes to fd 5 (ok, error, interrupted). SIGINT interrupts
// the running cell: a busy loop through vm's breakOnSigint, an await by rejecting it.
'use strict';
const fs = require('fs');
const util = require('util');
const vm = require('vm');
const { processTopLevelAwait } = require('internal/repl/await');

const CELL_IN = 4, STATUS_OUT = 5;
const INTERRUPTED = 'Script execution was interrupted by `SIGINT`';

// What a script run by `node file.js` has besides the global object.
globalThis.require = require;
globalThis.module = module;

let onInterrupt = null;
process.on('SIGINT', () => { if (onInterrupt) onInterrupt(); });

function status(seq, kind, code) {
  // the cell's stdout and stderr were flushed before (flushed())
  fs.writeSync(STATUS_OUT, `${seq} ${kind} ${code}\n`);
}

// Once a pipe is full node queues the rest of a write and finishes it later (libuv), so a
// record written at once could overtake the cell's last output: wait until every write to
// @stream so far went to the kernel (an empty write's callback runs after the ones before).
function flushed(stream) {
  return new Promise((resolve) => stream.write('', () => resolve()));
}

// The user's frames only: the runner's and node's own are cut from a stack.
function userStack(err) {
  if (!(err instanceof Error) || !err.stack) return util.inspect(err);
  const lines = err.stack.split('\n');
  const cut = lines.findIndex((l) => /^\s+at .*(node:vm|node:internal|runInThisContext|runCell|runNext|\/sandbox\/)/.test(l));
  return (cut > 0 ? lines.slice(0, cut) : lines).join('\n');
}

async function runCell(seq, code) {
  const name = `cell ${seq}`;
  const wrapped = processTopLevelAwait(code);
  let value = new vm.Script(wrapped === null ? code : wrapped, { filename: name })
    .runInThisContext({ breakOnSigint: true, displayErrors: false });
  if (wrapped !== null) {
    value = await new Promise((resolve, reject) => {
      onInterrupt = () => reject(new Error(INTERRUPTED));
      value.then(resolve, reject);
    }).finally(() => { onInterrupt = null; });
    value = value ? value.value : undefined;
  }
  return value;
}

let pending = Buffer.alloc(0);
let busy = false;
const queue = [];

function takeCells() {
  for (;;) {
    const nl = pending.indexOf(10);
    if (nl < 0) return;
    const [seq, len] = pending.subarray(0, nl).toString().split(' ').map(Number);
    if (pending.length < nl + 1 + len) return;
    queue.push({ seq, code: pending.subarray(nl + 1, nl + 1 + len).toString('utf8') });
    pending = pending.subarray(nl + 1 + len);
  }
}

async function runNext() {
  if (busy || queue.length === 0) return;
  busy = true;
  const { seq, code } = queue.shift();
  let kind = 'ok', rc = 0;
  try {
    const value = await runCell(seq, code);
    if (value !== undefined) process.stdout.write(util.inspect(value) + '\n');
  } catch (err) {
    const interrupted = err instanceof Error && err.message === INTERRUPTED;
    kind = interrupted ? 'interrupted' : 'error';
    rc = interrupted ? 130 : 1;
    process.stderr.write((interrupted ? 'Interrupted' : userStack(err)) + '\n');
  }
  await flushed(process.stdout);
  await flushed(process.stderr);
  status(seq, kind, rc);
  busy = false;
  setImmediate(runNext);
}

const cells = fs.createReadStream(null, { fd: CELL_IN, autoClose: false, highWaterMark: 65536 });
cells.on('data', (chunk) => {
  pending = Buffer.concat([pending, chunk]);
  takeCells();
  runNext();
});
cells.on('end', () => process.exit(0));
status(0, 'ready', 0);
