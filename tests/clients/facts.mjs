// facts.mjs - the script every client runs, and the facts its model must have seen.
//
// The script is five tool calls (issue 11, "Tests with real clients"): a python run, a bash
// run, read_workspace of the file the python run wrote, a failing run, and a degraded run (one
// whose output is cut at the server's output cap, VESTIBULE_MAX_OUTPUT_BYTES, set in the
// client's MCP config as a user would). The checks look only at what reached the model, as the
// model got it (a string, or JSON a client built): the server's own text is not consulted.

/** The output cap the MCP configs set (VESTIBULE_MAX_OUTPUT_BYTES) and the degraded run's size. */
export const OUTPUT_CAP = 2000;
const DEGRADED_BYTES = 3000; /* 2999 'v' and a newline: over the cap, under twice it (not stopped) */

export const SCRIPT = [
    {
        label: 'python run',
        kind: 'run_code',
        args: { language: 'python', code: "open('note.txt', 'w').write('vestibule-note 6x7\\n')\nprint('python says', 6 * 7)" },
    },
    { label: 'bash run', kind: 'run_code', args: { language: 'bash', code: 'echo "bash says $((6 * 7 + 1))"' } },
    { label: 'read_workspace', kind: 'read_workspace', args: { path: 'note.txt' } },
    {
        label: 'failing run',
        kind: 'run_code',
        args: { language: 'python', code: "import sys\nprint('failing on purpose', file=sys.stderr)\nsys.exit(3)" },
    },
    {
        label: 'degraded run (output cut)',
        kind: 'run_code',
        args: { language: 'python', code: `print('v' * ${DEGRADED_BYTES - 1})` },
    },
    {
        // issue 15: a PNG the run writes comes back as MCP image content; does the model get it
        // as an image? (a 3x2 red PNG made with the standard library only)
        label: 'plot run (an image)',
        kind: 'run_code',
        args: {
            language: 'python',
            code: [
                'import struct, zlib',
                'def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)',
                'raw = b"".join(b"\\x00" + b"\\xff\\x00\\x00" * 3 for _ in range(2))',
                'png = b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 3, 2, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")',
                'open("plot.png", "wb").write(png)',
                'print("plot written")',
            ].join('\n'),
        },
    },
    // issue 24: session_end's result must tell the model the session ended (before, clients
    // that hand over structuredContent alone showed {"session":…,"calls":0}). The handle is the
    // one the model saw in session_start's result ($SESSION, see fillArgs). On a backend without
    // sessions (naive) both are refused, and their facts are not checked.
    { label: 'session start', kind: 'session_start', args: { language: 'bash' } },
    { label: 'session end', kind: 'session_end', args: { session: '$SESSION' } },
];

/** The step that writes an image, and the first bytes of any PNG in base64. */
export const IMAGE_STEP = SCRIPT.findIndex((s) => s.label === 'plot run (an image)');
const SESSION_START = SCRIPT.findIndex((s) => s.kind === 'session_start');
const SESSION_END = SCRIPT.findIndex((s) => s.kind === 'session_end');

/**
 * A step's arguments with '$SESSION' replaced by the session handle the model saw in @prev (the
 * previous step's model text), as a model would copy it; "none" when there is none.
 */
export function fillArgs(args, prev) {
    const m = /session\\?"?\s*[:=]\s*\\?"?([A-Za-z0-9_.:-]{4,})/.exec(prev || '');
    return JSON.parse(JSON.stringify(args).replaceAll('$SESSION', m ? m[1] : 'none'));
}
const PNG_B64 = 'iVBORw0KGgo';

/**
 * Whether @seen (what the API request carried for the image step, as the client sent it)
 * holds the PNG as an image block of that API: Anthropic {type: "image"}, OpenAI Responses
 * {type: "input_image"}, Chat Completions {type: "image_url"}, Gemini {inlineData}, the AI SDK's
 * tool output {type: "file", mediaType: "image/..."} (which its providers send as an image);
 * base64 text inside a text block does not count.
 */
export function imageReached(seen) {
    const walk = (v) => {
        if (!v || typeof v !== 'object') return false;
        if (Array.isArray(v)) return v.some(walk);
        const isImage = v.type === 'image' || v.type === 'input_image' || v.type === 'image_url' || v.inlineData ||
            (v.type === 'file' && /^image\//.test(v.mediaType || ''));
        if (isImage && JSON.stringify(v).includes(PNG_B64)) return true;
        return Object.values(v).some(walk);
    };
    return walk(seen);
}

export const PROMPT = 'Use the vestibule tools as the script says, then stop.';

/**
 * What the model saw for one tool result, as one string: a string as is, text blocks joined,
 * anything else as JSON; then with JSON string escaping undone (a client may hand the model
 * JSON that holds JSON), so a fact reads the same whatever the nesting.
 */
export function modelText(seen) {
    let s;
    if (typeof seen === 'string') s = seen;
    else if (Array.isArray(seen) && seen.every((b) => b && typeof b.text === 'string')) s = seen.map((b) => b.text).join('\n');
    else s = JSON.stringify(seen);
    if (s === undefined) return '';
    for (let i = 0; i < 4 && /\\["n\\]/.test(s); i++) s = s.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    return s;
}

const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

// For each usage figure: its number, or the fact that it was not measured and why. A bare
// `null` (today's structuredContent) says neither.
function usageFacts(t) {
    const out = [];
    for (const [fig, words] of [['cpu', 'cpu'], ['mem_peak', 'mem_peak'], ['pids_peak', 'pids_peak']]) {
        const num = new RegExp(`${words}\\w*"?\\s*[:=]?\\s*\\d`).test(t);
        const why = new RegExp(`${words}[\\w ,]*not.measured"?\\s*[:=]?\\s*"?[^"\\s]`).test(t);
        if (!num && !why) out.push(`usage ${fig}: neither a number nor why it was not measured`);
    }
    return out;
}

/**
 * Check what the model saw for each step. `views[i]` is the model text for step i (undefined
 * if the client never sent one). Returns a list of failures (empty: every fact held).
 */
export function checkViews(views, grade, { sessions = true } = {}) {
    const fails = [];
    const need = (i, ok, what) => { if (!ok) fails.push(`${SCRIPT[i].label}: ${what}`); };
    SCRIPT.forEach((s, i) => {
        const t = views[i];
        if (!sessions && s.kind.startsWith('session_')) return;
        if (t === undefined) { fails.push(`${s.label}: no tool result reached the model`); return; }
        if (s.kind === 'run_code') {
            // exactly: "native" must not match "native-degraded (...)"
            need(i, new RegExp(`isolation: ${esc(grade)}(?=$|")`, 'm').test(t) || new RegExp(`"isolation"\\s*:\\s*"${esc(grade)}"`).test(t),
                `the grade "${grade}" is not there`);
            fails.push(...usageFacts(t).map((f) => `${s.label}: ${f}`));
        }
    });
    const has = (i, re, what) => views[i] !== undefined && need(i, re.test(views[i]), what);
    has(0, /python says 42/, 'no "python says 42"');
    has(1, /bash says 43/, 'no "bash says 43"');
    has(IMAGE_STEP, /plot written/, 'no "plot written"');
    has(2, /vestibule-note 6x7/, 'no file text "vestibule-note 6x7"');
    has(3, /exit.code"?\s*[:=]?\s*3\b/, 'no exit code 3');
    has(3, /failing on purpose/, 'no stderr "failing on purpose"');
    const cut = DEGRADED_BYTES - OUTPUT_CAP;
    has(4, new RegExp(`truncated[^\\n]{0,40}\\b${cut}\\b|\\b${cut}\\b[^\\n]{0,40}not shown`),
        `no note that the output was cut (${cut} of ${DEGRADED_BYTES} bytes not shown)`);
    if (sessions && !/^none\b/.test(grade)) {
        has(SESSION_START, /session\\?"?\s*[:=]\s*\\?"?[A-Za-z0-9_.:-]{4,}/, 'no session handle');
        has(SESSION_END, /\bended\b/, 'the model is not told the session ended');
    }
    // Only the revision's required _meta may be in a result (issue 11): none of ours.
    views.forEach((t, i) => t !== undefined && need(i, !/io\.modelcontextprotocol\/serverInfo/.test(t), 'the server\'s _meta reached the model'));
    return fails;
}

/** A one-line summary of what the model saw for a step, for the report table. */
export function summarize(t) {
    if (t === undefined) return '(nothing)';
    const kind = /^\s*\{/.test(t) ? 'JSON' : 'text';
    return `${kind}, ${t.length} chars`;
}
