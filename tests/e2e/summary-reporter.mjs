// A node:test reporter that counts test results (suites excluded) for run.mjs: passed,
// failed, skipped (skipped and todo tests: a todo test is a known gap, named in the output).
export default async function* summary(source) {
    let passed = 0, failed = 0, skipped = 0;
    const failures = [], todo = [];
    for await (const ev of source) {
        if (ev.type !== 'test:pass' && ev.type !== 'test:fail') continue;
        if (ev.data.details?.type === 'suite') continue;
        const name = `${ev.data.file ? ev.data.file.split('/').pop() : ''}: ${ev.data.name}`;
        if (ev.data.todo !== undefined && ev.data.todo !== false) {
            skipped++;
            todo.push(`${name} (${ev.type === 'test:pass' ? 'passes now' : 'fails'}: ${ev.data.todo})`);
        } else if (ev.type === 'test:fail') {
            failed++;
            failures.push(name);
        } else if (ev.data.skip !== undefined && ev.data.skip !== false) {
            skipped++;
        } else {
            passed++;
        }
    }
    yield JSON.stringify({ passed, failed, skipped, failures, todo }) + '\n';
}
