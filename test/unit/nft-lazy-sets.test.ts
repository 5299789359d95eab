import assert from 'node:assert/strict'
import {test} from 'node:test'
import {parseElements, type NftElement} from '../../src/parse/nft-elements.js'
import {checkSetBody} from '../../src/parse/nft-lazy-sets.js'
import {NftRuleset} from '../../src/parse/nft-ruleset.js'
import {readSetBody} from '../../src/parse/nft-statements.js'
import {NftTracer} from '../../src/trace/nft-tracer.js'
import type {Packet} from '../../src/trace/types.js'

/** A small seeded generator (mulberry32): the same bodies on every run. */
function seeded(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const TOKENS = [
  '10.0.0.1',
  '10.0.0.2',
  '10.0.0.10',
  'fd00::1',
  'FD00::2',
  '10.0.0.0/8',
  '10.0.0.1-10.0.0.9',
  'tcp',
  '6',
  '80',
  '080',
  'http',
  '.',
  '.',
  '.',
  ':',
  ':',
  'goto',
  'chain-a',
  'drop',
  'comment',
  'comment',
  '"a b"',
  '"x,y"',
  '"{"',
  '"',
  'timeout',
  '1h',
  'expires',
  'counter',
  'packets',
  'bytes',
  '0',
  ',',
  ',',
  ',',
  '{',
  '}',
  '#',
  'é',
  '\r',
  '\u00a0',
  'elements',
  '""',
]
const SEPARATORS = [' ', ' ', ' ', '', '\n\t\t\t', '\t', ', ', ' ,', ' . ']

function randomBody(rnd: () => number): string {
  const pick = <T>(a: T[]) => a[Math.floor(rnd() * a.length)]
  const lines = ['\t\ttype ipv4_addr . inet_proto . inet_service : verdict']
  if (rnd() < 0.3) lines.push('\t\tcomment "a set"')
  if (rnd() < 0.1) lines.push('\t\t# a comment {')
  let elements = `\t\telements ${pick(['= ', '=', ' = '])}{ `
  const n = Math.floor(rnd() * 12)
  for (let i = 0; i < n; i++) elements += pick(TOKENS) + pick(SEPARATORS)
  elements += pick([' }', ' }', '}', ' } x', '', ' }\r'])
  lines.push(elements)
  if (rnd() < 0.1) lines.push('\t\telements = { 10.9.9.9 }')
  if (rnd() < 0.1) lines.push('\t\tflags { interval }')
  return lines.join('\n') + '\n'
}

/** What the element reader makes of a body: its elements, or its fault. */
function read(body: string): NftElement[] | Error {
  const set = {table: 'ip t', name: 's', line: 1, isMap: true, elements: [] as NftElement[]}
  try {
    readSetBody(body, 2, set)
    return set.elements
  } catch (e) {
    return e as Error
  }
}

test('nft sets: a body the check vouches for reads without a fault, element by element as a whole (20,000 seeded bodies)', () => {
  const rnd = seeded(28)
  let vouched = 0
  let plain = 0
  let refusedByReader = 0
  for (let i = 0; i < 20_000; i++) {
    const body = randomBody(rnd)
    const bytes = Buffer.from(body, 'utf8')
    const shape = checkSetBody(bytes)
    const whole = read(body)
    if (whole instanceof Error) refusedByReader++
    if (!shape) continue
    vouched++
    assert.ok(!(whole instanceof Error), `the check vouched for a body the reader refuses: ${JSON.stringify(body)}`)
    assert.equal(shape.count, whole.length, JSON.stringify(body))
    for (let k = 0; k < shape.count; k++) {
      assert.deepEqual(
        parseElements(bytes.toString('utf8', shape.start[k], shape.end[k])),
        [whole[k]],
        JSON.stringify(body),
      )
      if (shape.keyAt && shape.keyLength)
        assert.equal(
          bytes.toString('utf8', shape.keyAt[k], shape.keyAt[k] + shape.keyLength[k]),
          whole[k].key[0],
          JSON.stringify(body),
        )
    }
    if (shape.keyAt && shape.count > 0) plain++
  }
  // Both ways are exercised: bodies vouched for (some with plain keys) and bodies the reader refuses.
  assert.ok(vouched > 1500 && plain > 200 && refusedByReader > 5000, `${vouched} ${plain} ${refusedByReader}`)
})

const ruleset = (serviceIps: string, extra = '') => `table ip kube-proxy {
\tset cluster-ips {
\t\ttype ipv4_addr
\t\telements = { 10.96.0.1, 10.96.0.2 }
\t}
${extra}\tmap service-ips {
\t\ttype ipv4_addr . inet_proto . inet_service : verdict
\t\telements = { ${serviceIps} }
\t}
\tchain nat-prerouting {
\t\ttype nat hook prerouting priority dstnat; policy accept;
\t\tjump services
\t}
\tchain services {
\t\tip daddr . meta l4proto . th dport vmap @service-ips
\t}
\tchain svc-a {
\t\tdnat to 10.244.0.1:8080
\t}
\tchain svc-b {
\t\tdnat to 10.244.0.2:8080
\t}
\tchain svc-c {
\t\tdnat to 10.244.0.3:8080
\t}
}
`

const packet = (dst: string, dport: number): Packet => ({
  src: '192.0.2.7',
  dst,
  proto: 'tcp',
  dport,
  sport: 40000,
  inIface: 'eth0',
})
const destinations = (rs: NftRuleset, dst: string, dport: number) =>
  new NftTracer(rs, {localAddresses: ['192.168.1.10']}).trace(packet(dst, dport)).destinations

test('nft sets: a map looked up by its first key finds the first element that matches, as a walk of every element does', () => {
  const many = Array.from({length: 5000}, (_, i) => `10.97.${i >> 8}.${i & 255} . tcp . 80 : goto svc-c`).join(
    ',\n\t\t\t',
  )
  // The same address twice (the first element for port 81, the second for 80), an address that is a prefix of
  // another's, and an element's comment and value naming the address.
  const rs = NftRuleset.parse(
    ruleset(
      `10.96.0.1 . tcp . 81 : goto svc-c, 10.96.0.10 . tcp . 80 comment "10.96.0.1" : goto svc-b,\n\t\t\t${many},\n\t\t\t10.96.0.1 . tcp . 80 : goto svc-a, 10.96.0.1 . tcp . 80 : goto svc-b`,
    ),
  )
  assert.deepEqual(destinations(rs, '10.96.0.1', 80), ['10.244.0.1:8080'])
  assert.deepEqual(destinations(rs, '10.96.0.1', 81), ['10.244.0.3:8080'])
  assert.deepEqual(destinations(rs, '10.96.0.10', 80), ['10.244.0.2:8080'])
  assert.deepEqual(destinations(rs, '10.97.19.135', 80), ['10.244.0.3:8080'])
  assert.deepEqual(destinations(rs, '10.96.0.3', 80), [])
  assert.equal(rs.table('ip kube-proxy')!.sets.get('service-ips')!.elements.length, 5004)
  // A prefix among the keys: every element is looked at, and the prefix matches.
  const withPrefix = NftRuleset.parse(
    ruleset('10.96.0.0/16 . tcp . 80 : goto svc-c, 10.96.0.1 . tcp . 80 : goto svc-a'),
  )
  assert.deepEqual(destinations(withPrefix, '10.96.0.1', 80), ['10.244.0.3:8080'])
})

test('nft sets: a broken set that no rule reaches is still refused while the ruleset is read, naming its line', () => {
  const unreached =
    '\tmap unused {\n\t\ttype ipv4_addr : verdict\n\t\telements = { 10.1.1.1 : goto svc-a, 10.1.1.2 : }\n\t}\n'
  assert.throws(() => NftRuleset.parse(ruleset('10.96.0.1 . tcp . 80 : goto svc-a', unreached)), {
    message: /^line 8: map element without a value in " 10\.1\.1\.2 : " in map unused$/,
  })
})
