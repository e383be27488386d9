// A node:test reporter that counts test results (suites excluded) and writes the plain
// closing line "e2e: N passed, N failed, N skipped", plus a JSON copy for scripts/test.sh.
export default async function* summary(source) {
    let passed = 0, failed = 0, skipped = 0;
    const failures = [];
    for await (const ev of source) {
        if (ev.type !== 'test:pass' && ev.type !== 'test:fail') continue;
        if (ev.data.details?.type === 'suite') continue;
        if (ev.type === 'test:fail') { failed++; failures.push(`${ev.data.file ?? ''} ${ev.data.name}`.trim()); }
        else if (ev.data.skip !== undefined || ev.data.todo !== undefined) skipped++;
        else passed++;
    }
    yield JSON.stringify({ passed, failed, skipped, failures }) + '\n';
}
