// A seeded campaign of hostile input through the real CLI (not part of the test suite: minutes, not seconds):
//   node scripts/cli-fuzz.mjs SEED COUNT [CONCURRENCY] [REPO]
// Each input i of a seed is one mutation (truncation, lines duplicated/swapped/moved across tables, a chain declared
// twice, *table/COMMIT dropped or doubled, a dump run into itself, CRLF, NUL, invalid UTF-8, huge lines, #kpd-not-read
// marks, empty or null files...) of one file of an example bundle (svc, scan) or of a dump or paste (trace), run under
// a 60 s bound by REPO's bin/run.js (default: this checkout). One JSON line per input goes to
// $OUT_DIR/$LABEL-SEED.jsonl (default /tmp/kpd-cli-fuzz/results-SEED.jsonl); inputs worth a look are kept beside it.
// Printed: inputs flagged HANG, EXIT-n (an undocumented code), STACK (a stack trace or a JavaScript error's words),
// STDERR-n (a refusal of more than one line), BADJSON. A confident verdict on broken input (exit 0 or 1 where the
// mutated node file left no required not-checked row: `nodeGap` false) is in the lines, for judging by hand.
import {spawn} from 'node:child_process'
import {mkdtempSync, cpSync, readdirSync, readFileSync, writeFileSync, rmSync, statSync, existsSync, unlinkSync, appendFileSync, mkdirSync} from 'node:fs'
import {join, basename, relative, resolve} from 'node:path'
import {tmpdir} from 'node:os'
import {Buffer} from 'node:buffer'
import {setTimeout, clearTimeout} from 'node:timers'

const [seedArg, countArg, concArg, repoArg] = process.argv.slice(2)
const repo = resolve(repoArg ?? join(import.meta.dirname, '..'))
const SEED = Number(seedArg), COUNT = Number(countArg), CONC = Number(concArg ?? 2)
const DIR = process.env.OUT_DIR ?? '/tmp/kpd-cli-fuzz'
const KEEP = join(DIR, 'keep')
const OUT = join(DIR, `${process.env.LABEL ?? 'results'}-${SEED}.jsonl`)
console.log(`campaign seed=${SEED} count=${COUNT} repo=${repo}`)

function rng(seed) { let a = seed >>> 0; return () => { a = (a + 0x6d2b79f5) >>> 0; let t = a; t = Math.imul(t ^ (t >>> 15), t | 1); t ^= t + Math.imul(t ^ (t >>> 7), t | 61); return ((t ^ (t >>> 14)) >>> 0) / 4294967296 } }
const BUNDLES = ['healthy', 'broken', 'dualstack', 'ipvs'].map((b) => join(repo, 'examples', `${b}-cluster`))
const PASTES = readdirSync(join(repo, 'test/fixtures/pastes')).map((f) => join(repo, 'test/fixtures/pastes', f))
const NFTS = readdirSync(join(repo, 'test/fixtures/nft')).map((f) => join(repo, 'test/fixtures/nft', f))

function filesOf(bundle) {
  const out = []
  const walk = (d) => { for (const f of readdirSync(d)) { const p = join(d, f); if (statSync(p).isDirectory()) walk(p)
      else out.push(relative(bundle, p)) } }
  walk(bundle)
  return out
}

const NOT_READ_LINE = '#kpd-not-read 1\tiptables-save\tiptables-save: command not found'
const lineMut = {
  truncLine: (L, r) => L.slice(0, Math.floor(r() * L.length)),
  dupLine: (L, r) => { const i = Math.floor(r() * L.length); return [...L.slice(0, i + 1), L[i], ...L.slice(i + 1)] },
  swapLines: (L, r) => { const a = Math.floor(r() * L.length), b = Math.floor(r() * L.length); const M = [...L]; [M[a], M[b]] = [M[b], M[a]]; return M },
  moveLine: (L, r) => { const M = [...L]; const [x] = M.splice(Math.floor(r() * M.length), 1); M.splice(Math.floor(r() * M.length), 0, x); return M },
  deleteLine: (L, r) => { const M = [...L]; M.splice(Math.floor(r() * M.length), 1); return M },
  dupDecl: (L, r) => { const idx = L.map((l, i) => (l.startsWith(':') ? i : -1)).filter((i) => i >= 0); if (!idx.length) return null; const i = idx[Math.floor(r() * idx.length)]; const M = [...L]; M.splice(idx[idx.length - 1] + 1, 0, L[i]); return M },
  dropTable: (L, r) => { const idx = L.map((l, i) => (l.startsWith('*') ? i : -1)).filter((i) => i >= 0); if (!idx.length) return null; const M = [...L]; M.splice(idx[Math.floor(r() * idx.length)], 1); return M },
  dupTable: (L, r) => { const idx = L.map((l, i) => (l.startsWith('*') ? i : -1)).filter((i) => i >= 0); if (!idx.length) return null; const i = idx[Math.floor(r() * idx.length)]; const M = [...L]; M.splice(i, 0, L[i]); return M },
  dropCommit: (L, r) => { const idx = L.map((l, i) => (l.trim() === 'COMMIT' ? i : -1)).filter((i) => i >= 0); if (!idx.length) return null; const M = [...L]; M.splice(idx[Math.floor(r() * idx.length)], 1); return M },
  dupCommit: (L, r) => { const idx = L.map((l, i) => (l.trim() === 'COMMIT' ? i : -1)).filter((i) => i >= 0); if (!idx.length) return null; const i = idx[Math.floor(r() * idx.length)]; const M = [...L]; M.splice(i, 0, 'COMMIT'); return M },
  concatSelf: (L) => [...L.filter((l, i) => i < L.length - 1 || l !== ''), ...L],
  markFirst: (L) => [NOT_READ_LINE, ...L],
  markAnywhere: (L, r) => { const M = [...L]; M.splice(Math.floor(r() * M.length), 0, NOT_READ_LINE); return M },
  markOnly: () => [NOT_READ_LINE, ''],
  hugeLine: (L, r) => { const M = [...L]; M.splice(Math.floor(r() * M.length), 0, (r() < 0.5 ? '-A KUBE-SERVICES ' : '') + 'x'.repeat(r() < 0.5 ? 200000 : 1100000)); return M },
  chainAcrossTables: (L, r) => { // a rule line moved into another table
    const tables = L.map((l, i) => (l.startsWith('*') ? i : -1)).filter((i) => i >= 0); const rules = L.map((l, i) => (l.startsWith('-A') ? i : -1)).filter((i) => i >= 0)
    if (tables.length < 2 || !rules.length) return null; const M = [...L]; const [x] = M.splice(rules[Math.floor(r() * rules.length)], 1); const t = tables[Math.floor(r() * tables.length)]; M.splice(t + 1, 0, x); return M },
}
const byteMut = {
  truncByte: (B, r) => B.subarray(0, Math.floor(r() * B.length)),
  crlf: (B) => Buffer.from(B.toString('latin1').replace(/\n/g, '\r\n'), 'latin1'),
  nul: (B, r) => { const i = Math.floor(r() * B.length); return Buffer.concat([B.subarray(0, i), Buffer.from([0]), B.subarray(i)]) },
  badUtf8: (B, r) => { const i = Math.floor(r() * B.length); return Buffer.concat([B.subarray(0, i), Buffer.from([0xff, 0xfe, 0xc3]), B.subarray(i)]) },
  empty: () => Buffer.alloc(0),
  whitespace: () => Buffer.from('  \n\n \n'),
  garbage: (B, r) => Buffer.from(Array.from({length: 1 + Math.floor(r() * 200)}, () => Math.floor(r() * 256))),
  flipByte: (B, r) => { const C = Buffer.from(B); if (C.length) C[Math.floor(r() * C.length)] ^= 1 << Math.floor(r() * 8); return C },
}
const jsonMut = {
  jsonNull: () => Buffer.from('null'), jsonArray: () => Buffer.from('[]'), jsonEmptyObj: () => Buffer.from('{}'),
  dropItem: (B, r) => { try { const j = JSON.parse(B); const items = j.items ?? (Array.isArray(j) ? j : null); if (!items?.length) return null; items.splice(Math.floor(r() * items.length), 1); return Buffer.from(JSON.stringify(j)) } catch { return null } },
  wrongType: (B, r) => { try { const j = JSON.parse(B); const paths = []; const walk = (o) => { if (o && typeof o === 'object') for (const k of Object.keys(o)) { paths.push([o, k]); walk(o[k]) } }; walk(j); if (!paths.length) return null; const [o, k] = paths[Math.floor(r() * paths.length)]; const vals = [null, 42, 'x', [], {}, true, -1, '10.96.10.10; rm -rf /', '$(id)']; o[k] = vals[Math.floor(r() * vals.length)]; return Buffer.from(JSON.stringify(j)) } catch { return null } },
}

function mutate(buf, file, r) {
  const isJson = file.endsWith('.json')
  const pools = [Object.keys(byteMut).map((k) => ['b', k]), Object.keys(isJson ? jsonMut : lineMut).map((k) => [isJson ? 'j' : 'l', k])]
  const all = pools.flat()
  const [kind, name] = all[Math.floor(r() * all.length)]
  let out
  if (kind === 'b') out = byteMut[name](buf, r)
  else if (kind === 'j') out = jsonMut[name](buf, r)
  else { const L = buf.toString('latin1').split('\n'); const M = lineMut[name](L, r); out = M && Buffer.from(M.join('\n'), 'latin1') }
  return {name, out}
}

function run(args, stdin) {
  return new Promise((resolve) => {
    const t0 = Date.now()
    const p = spawn('node', [join(repo, 'bin/run.js'), ...args], {env: {...process.env, NO_COLOR: '1', COLUMNS: '100'}, stdio: ['pipe', 'pipe', 'pipe']})
    let out = '', err = '', timedOut = false
    p.stdout.on('data', (d) => { if (out.length < 2e6) out += d })
    p.stderr.on('data', (d) => { if (err.length < 2e5) err += d })
    const timer = setTimeout(() => { timedOut = true; p.kill('SIGKILL') }, 60000)
    p.on('close', (code) => { clearTimeout(timer); resolve({code, out, err, timedOut, ms: Date.now() - t0}) })
    p.stdin.on('error', () => {})
    p.stdin.end(stdin ?? '')
  })
}

function judge(res, fmt) {
  const flags = []
  if (res.timedOut) flags.push('HANG')
  if (![0, 1, 2, 3].includes(res.code)) flags.push(`EXIT-${res.code}`)
  if (/\n\s+at .*\(.*:\d+:\d+\)|TypeError|RangeError|ReferenceError|SyntaxError: |Cannot read prop|is not a function|Unhandled|uncaught/i.test(res.err + (fmt === 'json' ? '' : res.out))) flags.push('STACK')
  const errLines = res.err.split('\n').filter((l) => l.trim() !== '')
  if (res.code === 2 && errLines.length !== 1) flags.push(`STDERR-${errLines.length}`)
  return flags
}

async function one(i) {
  const r = rng(SEED * 100003 + i)
  const pick = (a) => a[Math.floor(r() * a.length)]
  const mode = pick(['svc', 'svc', 'svc', 'scan', 'trace', 'trace'])
  const rec = {seed: SEED, i, mode}
  const dir = mkdtempSync(join(tmpdir(), 's44fz-'))
  try {
    if (mode === 'trace') {
      const useBundle = r() < 0.6
      let src
      if (useBundle) { const b = pick(BUNDLES); const fs = filesOf(b).filter((f) => /ip6?tables.*save|nft-ruleset|nft-kube-proxy/.test(f)); src = join(b, pick(fs)) }
      else src = pick([...PASTES, ...NFTS])
      const {name, out} = mutate(readFileSync(src), basename(src), r)
      if (!out) return null
      const f = join(dir, 'in.txt'); writeFileSync(f, out)
      const isNft = /nft-ruleset|nft-kube-proxy|\.nft|nft\//.test(src) && !/save/.test(src)
      const v6 = /ip6/.test(src)
      const args = ['trace', isNft ? '--nft' : '--iptables-save', r() < 0.3 ? '-' : f, '--src', v6 ? 'fd00:10:244::5' : '10.244.1.5', '--dst', v6 ? 'fd00:10:96::10:10' : '10.96.10.10', '--dport', '80']
      const fmt = r() < 0.5 ? 'json' : 'table'
      args.push('-o', fmt)
      Object.assign(rec, {src: relative(repo, src), mut: name, args: args.map((a) => (a === f ? 'IN' : a)), fmt})
      const res = await run(args, args.includes('-') ? out : '')
      Object.assign(rec, {code: res.code, ms: res.ms, flags: judge(res, fmt), err: res.err.slice(0, 400)})
      if (fmt === 'json' && res.code === 0) { try { const j = JSON.parse(res.out); rec.verdict = j.verdict ?? j.result?.verdict ?? j.outcome; rec.notes = (j.notes ?? []).length } catch { rec.flags.push('BADJSON') } }
      if (res.code === 0 || res.flags?.length) writeFileSync(join(KEEP, `${SEED}-${i}.in`), out)
      return rec
    }
    const b = pick(BUNDLES)
    const copy = join(dir, 'b'); cpSync(b, copy, {recursive: true})
    const files = filesOf(copy)
    // extra not-read files placed on a node
    const extra = ['nodes/node-a/nft-not-read.txt', 'nodes/node-b/iptables-backends-not-read.txt', 'nodes/node-a/agent-not-read.txt', 'nodes/node-b/error.txt']
    const target = r() < 0.1 ? pick(extra) : pick(files)
    const full = join(copy, target)
    const base = existsSync(full) ? readFileSync(full) : Buffer.from(target.includes('backends') ? '#kpd-not-read 127\tiptables-legacy-save\tsh: 1: iptables-legacy-save: not found\n' : '#kpd-not-read 127\tnft list ruleset\tsh: 1: nft: not found\n')
    let name, out
    if (r() < 0.04) { name = 'deleteFile'; out = null; if (existsSync(full)) unlinkSync(full) }
    else { ({name, out} = mutate(base, target, r)); if (!out) return null; writeFileSync(full, out) }
    const fmt = pick(['json', 'json', 'table', 'yaml'])
    const args = mode === 'svc' ? ['svc', 'web', '-n', 'shop', '--snapshot', copy, '-o', fmt] : ['scan', '-A', '--snapshot', copy, '-o', fmt === 'table' ? 'table' : 'json']
    Object.assign(rec, {bundle: basename(b), target, mut: name, args: args.map((a) => (a === copy ? 'BUNDLE' : a)), fmt})
    const res = await run(args)
    Object.assign(rec, {code: res.code, ms: res.ms, flags: judge(res, fmt), err: res.err.slice(0, 400)})
    if (args.includes('json') && (res.code === 0 || res.code === 1 || res.code === 3)) {
      try {
        const j = JSON.parse(res.out)
        const reps = j.kind === 'ScanReport' ? j.services ?? [] : [j]
        const node = target.match(/nodes\/([^/]+)\//)?.[1]
        rec.findings = [...new Set(reps.flatMap((s) => (s.findings ?? []).map((f) => `${f.code}@${f.node ?? ''}`)))].sort()
        rec.nodeGap = node ? reps.some((s) => (s.notChecked ?? []).some((n) => n.node === node && n.required)) : undefined
        rec.gaps = [...new Set(reps.flatMap((s) => (s.notChecked ?? []).map((n) => `${n.node}:${n.check}:${n.required ? 'R' : 'o'}`)))].sort()
      } catch { rec.flags.push('BADJSON') }
    }
    if (rec.flags.length || res.code === 0 || res.code === 1) { const k = join(KEEP, `${SEED}-${i}`); cpSync(copy, k, {recursive: true}) }
    return rec
  } finally { rmSync(dir, {recursive: true, force: true}) }
}

mkdirSync(KEEP, {recursive: true})
let next = 0, done = 0
async function worker() { for (;;) { const i = next++; if (i >= COUNT) return; const rec = await one(i).catch((e) => ({seed: SEED, i, flags: ['HARNESS'], err: String(e.stack)})); done++; if (rec) { appendFileSync(OUT, JSON.stringify(rec) + '\n'); if (rec.flags?.length) console.log(JSON.stringify(rec).slice(0, 600)) } } }
await Promise.all(Array.from({length: CONC}, worker))
console.log('done', done)
