import type {Prng} from './seeded.js'

/**
 * Seeded input mutation for the fuzz test (the generator: seeded.ts): mutators that turn a real dump into the kinds of
 * broken input people and failing pipes produce (cut-offs, run-together lines, giant lines, deep nesting, odd bytes,
 * odd numbers, malformed JSON).
 */

/**
 * White space that is not a space or a line break: a vertical tab, a form feed, a no-break space (copied from a web
 * page or a chat), the line and paragraph separators, a byte order mark, a tab, a carriage return, NEL.
 */
const ODD_WHITESPACE = ['\v', '\f', '\u00a0', '\u2028', '\u2029', '\ufeff', '\t', '\r', '\u0085']

/**
 * Names a hostile node or API could give: terminal controls (clear screen, a window title, an OSC 52 clipboard
 * write, C1 CSI), bidi overrides, zero-width characters, a line break that starts a forged line, a leading '-'.
 */
const HOSTILE_NAMES = [
  'x\x1b[2J\x1b[H',
  'x\x1b]0;title\x07',
  'x\x1b]52;c;ZWNobyBvd25lZA==\x07',
  'x\x9b31m',
  'node-a\u202eb-edon',
  'node\u200b-a',
  'web\n✓ shop/web: every traced path works',
  '-rf',
  '--help',
  '-KUBE-SVC-X',
]

/** Words that steer a mutation into the parsers' interesting corners. */
const TOKENS = [
  '-A',
  ' -A KUBE-SVC-X -j DROP',
  '*nat',
  '*filter',
  'COMMIT',
  ':KUBE-X - [0:0]',
  '[0:0]',
  '[12:345] ',
  '-m',
  '-j',
  '-g',
  '!',
  '"',
  '\\',
  '\\"',
  '{',
  '}',
  '{ }',
  ':',
  '.',
  ',',
  ' . ',
  ' : ',
  '/',
  '/33',
  '/129',
  '0x',
  '0xZZ',
  '--probability',
  '--probability 2',
  '--mark 0x4000/0x4000',
  '--to-destination',
  '--dport',
  '--dport 1:65536',
  'table ip kube-proxy {',
  'chain x {',
  'map m {',
  'set s {',
  'elements = {',
  'comment',
  'comment "',
  'jump',
  'goto',
  'vmap',
  'numgen random mod 0',
  'numgen random mod 4294967296',
  'type nat hook prerouting priority dstnat; policy accept;',
  'priority',
  'timeout',
  'counter packets',
  '-> ',
  '-t',
  '-a',
  'TCP',
  'src=',
  'dst=',
  'sport=70000',
  'nexthop',
  'via',
  '=',
  ' = ',
  '::',
  '[::1]:80',
  '10.96.10.10',
  '10.96.10.300',
  'fd00::10',
  '\t',
  '\r',
  '\0',
  '\u00ff',
  '\u202e',
  '\n',
  '\n\n',
  ...ODD_WHITESPACE,
  ...HOSTILE_NAMES,
]
const NUMBERS = [
  '0',
  '-1',
  '65536',
  '4294967296',
  '18446744073709551616',
  '1e400',
  'NaN',
  '-0',
  '0.99999999999999999',
  '00000000000000000000000000001',
  '0x7fffffff',
]

type Mutator = (text: string, r: Prng) => string

const at = (text: string, r: Prng) => r.int(text.length + 1)
const lines = (text: string) => text.split('\n')

const MUTATORS: Array<[string, Mutator]> = [
  ['truncate', (t, r) => t.slice(0, at(t, r))],
  [
    'delete span',
    (t, r) => {
      const a = at(t, r)
      return t.slice(0, a) + t.slice(a + 1 + r.int(200))
    },
  ],
  [
    'delete line',
    (t, r) => {
      const ls = lines(t)
      ls.splice(r.int(ls.length), 1)
      return ls.join('\n')
    },
  ],
  [
    'duplicate lines',
    (t, r) => {
      const ls = lines(t)
      const i = r.int(ls.length)
      ls.splice(i, 0, ...ls.slice(i, i + 1 + r.int(5)))
      return ls.join('\n')
    },
  ],
  [
    'swap lines',
    (t, r) => {
      const ls = lines(t)
      const i = r.int(ls.length)
      const j = r.int(ls.length)
      ;[ls[i], ls[j]] = [ls[j], ls[i]]
      return ls.join('\n')
    },
  ],
  [
    'join lines',
    (t, r) => {
      const nl = t.indexOf('\n', at(t, r))
      return nl < 0 ? t : t.slice(0, nl) + ' ' + t.slice(nl + 1)
    },
  ],
  [
    'insert token',
    (t, r) => {
      const a = at(t, r)
      return t.slice(0, a) + r.pick(TOKENS) + t.slice(a)
    },
  ],
  [
    'replace byte',
    (t, r) => {
      const a = r.int(Math.max(1, t.length))
      return t.slice(0, a) + String.fromCharCode(r.int(256)) + t.slice(a + 1)
    },
  ],
  [
    'replace number',
    (t, r) => {
      const re = /\d+/g
      const found = [...t.matchAll(re)]
      if (found.length === 0) return t
      const m = r.pick(found)
      return t.slice(0, m.index) + r.pick(NUMBERS) + t.slice(m.index + m[0].length)
    },
  ],
  [
    'giant line',
    (t, r) => {
      const a = t.lastIndexOf('\n', at(t, r)) + 1
      const unit = r.pick(['x', '-A KUBE-X ', '{', '"', ', 1.2.3.4', ' . ', 'a'.repeat(64)])
      return t.slice(0, a) + unit.repeat(Math.ceil((150_000 + r.int(1_200_000)) / unit.length)) + '\n' + t.slice(a)
    },
  ],
  [
    'odd white space',
    (t, r) => {
      // Every space of one line, or of the whole input, becomes one odd character.
      const ch = r.pick(ODD_WHITESPACE)
      if (r.chance(0.3)) return t.replaceAll(' ', ch)
      const ls = lines(t)
      const i = r.int(ls.length)
      ls[i] = ls[i].replaceAll(' ', ch)
      return ls.join('\n')
    },
  ],
  [
    'hostile name',
    (t, r) => {
      // One name (a chain, a node, a Pod, a word) becomes a hostile one everywhere it appears.
      const names = [...new Set(t.match(/\b(?:KUBE-[A-Z0-9-]+|[a-z][a-z0-9-]{2,})\b/g) ?? [])]
      if (names.length === 0) return t
      const name = r.pick(names)
      return t.replaceAll(name, r.chance(0.5) ? r.pick(HOSTILE_NAMES) : name + r.pick(HOSTILE_NAMES))
    },
  ],
  [
    'deep nesting',
    (t, r) => {
      const a = at(t, r)
      const depth = 1000 + r.int(60_000)
      const [open, close] = r.pick([
        ['{', '}'],
        ['[', ']'],
        ['{"a":', '}'],
      ])
      return t.slice(0, a) + open.repeat(depth) + (r.chance(0.5) ? close.repeat(depth) : '') + t.slice(a)
    },
  ],
]

/** One to four mutations of `text`; `applied` names them, for the failure message. */
export function mutate(text: string, r: Prng): {text: string; applied: string[]} {
  const applied: string[] = []
  let out = text
  const n = 1 + r.int(4)
  for (let i = 0; i < n; i++) {
    const [name, fn] = r.pick(MUTATORS)
    applied.push(name)
    out = fn(out, r)
  }
  return {text: out, applied}
}

/** A random JSON value of an unexpected shape: wrong types, empty containers, deep nesting, huge strings. */
function oddJson(r: Prng): string {
  const depth = 1 + r.int(20_000)
  return r.pick([
    'null',
    'true',
    '0',
    '-1',
    '1e308',
    '""',
    '"x y"',
    '[]',
    '{}',
    '[null]',
    '{"": null}',
    '{"jump": null}',
    '{"match": {}}',
    '{"concat": 5}',
    '{"set": "x"}',
    '{"elem": {}}',
    '{"prefix": {"addr": [], "len": "x"}}',
    '{"range": []}',
    '[' + '['.repeat(depth) + ']'.repeat(depth) + ']',
    '{"concat": ' + '['.repeat(depth) + ']'.repeat(depth) + '}',
    '{"set": ' + '[{"set": '.repeat(depth) + '[]' + '}]'.repeat(depth) + '}',
    JSON.stringify('z'.repeat(100_000)),
    ...HOSTILE_NAMES.map((n) => JSON.stringify(n)),
  ])
}

/** Replaces one value somewhere in a JSON document (found textually: no recursion over the document). */
export function mutateJson(text: string, r: Prng): {text: string; applied: string[]} {
  const starts = [...text.matchAll(/(?<=[:[,]\s*)(?:"(?:[^"\\]|\\.)*"|-?\d[\d.eE+-]*|true|false|null|\{\}|\[\])/g)]
  if (starts.length === 0 || r.chance(0.3)) return mutate(text, r)
  const m = r.pick(starts)
  return {text: text.slice(0, m.index) + oddJson(r) + text.slice(m.index + m[0].length), applied: ['json value']}
}
