#!/usr/bin/env node
// The vestibule-mcp launcher (the esbuild/biome pattern): npm installs exactly one of the
// per-platform optional dependencies below, the one whose "os"/"cpu"/"libc" fields match this
// machine; this script finds its prebuilt binary and runs it with our arguments, stdio and exit
// status. It adds nothing to the MCP stream: stdout belongs to the server.
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');

const PLATFORMS = {
  'linux x64': '@vestibule-mcp/linux-x64',
  'linux arm64': '@vestibule-mcp/linux-arm64',
};
const GLIBC_MIN = [2, 34];
const SOURCE = "the README's 'Building from source'";

function fail(msg) {
  process.stderr.write(`vestibule-mcp: ${msg}\n`);
  process.exit(1);
}

const key = `${process.platform} ${process.arch}`;
const pkg = PLATFORMS[key];
if (!pkg) {
  fail(`no prebuilt binary for ${key}: this package has Linux x64 and arm64 (glibc ` +
       `${GLIBC_MIN.join('.')}+) only, since the sandbox needs Linux namespaces; on ` +
       `macOS or Windows run it inside a Linux VM or WSL 2, or build from source (${SOURCE})`);
}

// glibcVersionRuntime is absent under musl (Alpine), where the glibc binary cannot load.
const glibc = process.report && process.report.getReport().header.glibcVersionRuntime;
if (!glibc) {
  fail(`the prebuilt binary needs glibc ${GLIBC_MIN.join('.')} or later, and this system ` +
       `has none (musl, e.g. Alpine): use a Debian/Ubuntu/Fedora based system or build from ` +
       `source (${SOURCE})`);
}
const [maj, min] = glibc.split('.').map(Number);
if (maj < GLIBC_MIN[0] || (maj === GLIBC_MIN[0] && min < GLIBC_MIN[1])) {
  fail(`the prebuilt binary needs glibc ${GLIBC_MIN.join('.')} or later (Debian 12, ` +
       `Ubuntu 22.04 and later); this system has ${glibc}: build from source (${SOURCE})`);
}

let bin;
try {
  bin = require.resolve(`${pkg}/bin/vestibule-mcp`);
} catch {
  fail(`the package ${pkg} that holds the binary for ${key} is not installed (was npm run ` +
       `with --omit=optional or --no-optional?): reinstall with optional dependencies, ` +
       `e.g. npm install vestibule-mcp`);
}
try {
  fs.accessSync(bin, fs.constants.X_OK);
} catch {
  fs.chmodSync(bin, 0o755); // some package managers drop the mode bits
}

// Node cannot exec(2) in place, so it waits for the child and passes on what a client sends
// it: a signal to the launcher goes to the server, and the server's exit becomes ours.
const child = spawn(bin, process.argv.slice(2), { stdio: 'inherit' });
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
  process.on(sig, () => child.kill(sig));
}
child.on('error', (e) => fail(`cannot start '${bin}': ${e.message}`));
child.on('exit', (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  }
  process.exit(code === null ? 1 : code);
});
