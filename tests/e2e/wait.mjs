// wait.mjs - the polling helpers, apart from lib.mjs (which needs VESTIBULE_BIN and probes the
// engine when imported) so that files driving another server command (oci.test.mjs: `docker
// run -i` of the image) and the fixtures they share (egress-fixtures.mjs) can use them.
// lib.mjs re-exports both.

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Poll @fn until it returns a truthy value or @ms pass; returns the last value. */
export async function waitFor(fn, ms, step = 50) {
    const end = Date.now() + ms;
    for (;;) {
        const v = await fn();
        if (v || Date.now() >= end) return v;
        await sleep(step);
    }
}
