// The python data variant (setup --from-debian --python-data): numpy, pandas, matplotlib and
// scipy import; pandas reads a CSV from the workspace; a plain plt.show() comes back as an
// image that decodes. Runs only against a server whose python is that variant
// (E2E_PYTHON_DATA=1: scripts/test.sh sets it for its data runs); skipped otherwise, saying so.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { assertExitCode, assertIsolation, connect, makeWorld, runCode } from './lib.mjs';

const ON = process.env.E2E_PYTHON_DATA === '1';
const skip = ON ? false : 'E2E_PYTHON_DATA is not 1: the server under test has the standard python';

function pngSize(data) {
    const b = Buffer.from(data, 'base64');
    assert.deepEqual([...b.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature');
    return { w: b.readUInt32BE(16), h: b.readUInt32BE(20) };
}

test('numpy, pandas, matplotlib and scipy import; pandas reads a workspace CSV', { skip }, async (t) => {
    const w = makeWorld(t);
    fs.writeFileSync(path.join(w.ws, 'data.csv'), 'x,y\n1,2\n3,5\n10,20\n');
    const conn = await connect(w);
    const r = await runCode(conn, 'python', `
import numpy, pandas, matplotlib, scipy, scipy.stats
df = pandas.read_csv('data.csv')
print('sum', int(df['y'].sum()), 'mean', float(df['x'].mean()))
print('r', round(float(scipy.stats.pearsonr(df['x'], df['y'])[0]), 3))
print('backend', matplotlib.get_backend())`, { timeout_seconds: 60 });
    assertExitCode(r.text, 0);
    assertIsolation(r.text);
    assert.match(r.text, /^sum 27 mean 4\.666/m);
    assert.match(r.text, /^r 0\.99\d/m);
    assert.match(r.text, /^backend module:\/\/vestibule_mpl$/m);
});

test('a plain plt.show() comes back as an image that decodes', { skip }, async (t) => {
    const w = makeWorld(t);
    const conn = await connect(w);
    const r = await runCode(conn, 'python', `
import matplotlib.pyplot as plt
fig = plt.figure(figsize=(4, 3), dpi=50)
plt.plot([1, 2, 3], [1, 4, 9])
plt.show()`, { timeout_seconds: 60 });
    assertExitCode(r.text, 0);
    const imgs = r.result.content.filter((c) => c.type === 'image');
    assert.equal(imgs.length, 1, r.text);
    assert.equal(imgs[0].mimeType, 'image/png');
    assert.deepEqual(pngSize(imgs[0].data), { w: 200, h: 150 });
    const f = r.result.structuredContent.files.find((x) => x.path === 'figure-1.png');
    assert.ok(f && f.attached === true && f.change === 'new', JSON.stringify(r.result.structuredContent.files));
    assert.ok(fs.existsSync(path.join(w.ws, 'figure-1.png')), 'the figure is in the workspace');
});
