// cli-bins.mjs OUTDIR - put the client CLIs (claude, codex, gemini, opencode) into OUTDIR as
// symlinks to the programs the drivers run, for tests that call the CLIs by name
// (tests/package/install-client.sh). node_modules/.bin is no good for that: this folder's
// .npmrc turns install scripts off, so `.bin/claude` is the package's placeholder that only
// prints "claude native binary not installed" (the postinstall would copy the real binary
// over it); see the comment above `bins` in drivers.mjs.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bins } from './drivers.mjs';

const out = process.argv[2];
if (!out) {
    console.error('usage: node cli-bins.mjs OUTDIR');
    process.exit(2);
}
const modules = path.join(path.dirname(fileURLToPath(import.meta.url)), 'node_modules');
fs.mkdirSync(out, { recursive: true });
let missing = 0;
for (const [name, where] of Object.entries(bins)) {
    const target = where(modules);
    if (!fs.existsSync(target)) {
        console.error(`cli-bins: ${name}: ${target} is missing (npm install in tests/clients first)`);
        missing++;
        continue;
    }
    const link = path.join(out, name);
    fs.rmSync(link, { force: true });
    fs.symlinkSync(target, link);
}
process.exit(missing ? 1 : 0);
