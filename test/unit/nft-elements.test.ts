import assert from 'node:assert/strict'
import {randomBytes} from 'node:crypto'
import {readFileSync} from 'node:fs'
import {test} from 'node:test'
import {parseElements} from '../../src/parse/nft-elements.js'
import {parseNftDump} from '../../src/parse/nft-dump.js'
import {NftRuleset} from '../../src/parse/nft-ruleset.js'
import {NftTracer} from '../../src/trace/nft-tracer.js'
import type {Packet} from '../../src/trace/types.js'
import {tryRun} from '../lab/sh.js'
import {cpuTimed} from '../helpers/cpu-time.js'

const NODE = '192.168.1.10'
const FIXTURE = 'test/fixtures/nft/kube-proxy-comments'
const pkt = (over: Partial<Packet>): Packet => ({
  src: '10.244.1.5',
  dst: '10.96.7.7',
  proto: 'tcp',
  dport: 80,
  sport: 40000,
  inIface: 'cni0',
  outIface: 'eth0',
  ...over,
})

/** The verdicts kube-proxy's rules give; every one depends on reading a map element that carries a comment. */
function assertKubeProxyVerdicts(text: string, form: string): void {
  const rs = parseNftDump(text)
  const trace = (p: Partial<Packet>) => new NftTracer(rs, {localAddresses: [NODE]}).trace(pkt(p))
  const noEndpoints = trace({dst: '10.96.7.7'})
  assert.equal(noEndpoints.verdict, 'REJECT', `${form}: Service with no endpoints is REJECTed`)
  const localNoEndpoint = trace({src: '192.0.2.44', dst: NODE, dport: 30080, inIface: 'eth0'})
  assert.equal(localNoEndpoint.verdict, 'DROP', `${form}: Local-policy NodePort with no local endpoint is DROPped`)
  const outsideRange = trace({src: '192.0.2.9', dst: '203.0.113.50', inIface: 'eth0'})
  assert.equal(outsideRange.verdict, 'DROP', `${form}: source outside loadBalancerSourceRanges is DROPped`)
  const insideRange = trace({src: '198.51.100.7', dst: '203.0.113.50', inIface: 'eth0'})
  assert.equal(insideRange.verdict, 'DNAT', `${form}: source inside the ranges reaches the backend`)
  assert.deepEqual(insideRange.destinations, ['10.244.2.31:8080'])
  const web = trace({dst: '10.96.7.20'})
  assert.equal(web.verdict, 'DNAT', form)
  assert.deepEqual(web.destinations, ['10.244.1.21:8080', '10.244.2.22:8080'])
  assert.deepEqual(
    web.outcomes.map((o) => o.probability),
    [0.5, 0.5],
  )
  const nodePort = trace({src: '192.0.2.44', dst: NODE, dport: 30090, inIface: 'eth0'})
  assert.equal(nodePort.verdict, 'DNAT', form)
  assert.ok(nodePort.masquerade, `${form}: NodePort traffic is masqueraded`)
  const sets = rs.table('ip kube-proxy')!.sets
  assert.deepEqual(
    sets.get('no-endpoint-services')!.elements,
    [{key: ['10.96.7.7', 'tcp', '80'], value: 'goto reject-chain', comment: 'shop/empty:http'}],
    form,
  )
  assert.deepEqual(
    sets.get('affinity-clients')!.elements,
    [{key: ['10.244.9.9']}],
    `${form}: timeout and expiry are not part of the key`,
  )
  assert.deepEqual(
    sets
      .get('counted-sources')!
      .elements.map((e) => e.key)
      .sort(),
    [['10.250.0.1-10.250.0.9'], ['172.16.0.0/12']],
    `${form}: counters are not part of the key`,
  )
}

test('nft element comments, timeouts, counters and intervals: recorded `nft list ruleset` text and JSON trace as kube-proxy programs them', () => {
  assertKubeProxyVerdicts(readFileSync(`${FIXTURE}.list.txt`, 'utf8'), 'text')
  assertKubeProxyVerdicts(readFileSync(`${FIXTURE}.list.json`, 'utf8'), 'json')
})

test('nft element comments: the real nft loads the kube-proxy-shaped ruleset and reads it back; both forms trace right', (t) => {
  if (process.getuid?.() !== 0 || tryRun('sh', ['-c', 'command -v nft']).code !== 0) {
    if (process.env.CI) assert.fail('needs root and nft in CI')
    t.skip('needs root and nft')
    return
  }
  const ns = `kpdel${randomBytes(4).toString('hex')}`
  assert.equal(tryRun('ip', ['netns', 'add', ns]).code, 0)
  try {
    const load = tryRun('ip', ['netns', 'exec', ns, 'nft', '-f', `${FIXTURE}.nft`])
    assert.equal(load.code, 0, load.stderr)
    const text = tryRun('ip', ['netns', 'exec', ns, 'nft', 'list', 'ruleset'])
    const json = tryRun('ip', ['netns', 'exec', ns, 'nft', '-j', 'list', 'ruleset'])
    assert.equal(text.code, 0, text.stderr)
    assert.equal(json.code, 0, json.stderr)
    const withoutExpiry = (s: string) =>
      s.replace(/expires \S+/g, 'expires X').replace(/"expires": \d+/g, '"expires": X')
    assert.equal(
      withoutExpiry(text.stdout),
      withoutExpiry(readFileSync(`${FIXTURE}.list.txt`, 'utf8')),
      'the recorded text is what nft prints',
    )
    assertKubeProxyVerdicts(text.stdout, 'live text')
    assertKubeProxyVerdicts(json.stdout, 'live json')
  } finally {
    tryRun('ip', ['netns', 'del', ns])
  }
})

test('nft elements: comments with separators inside, data maps, inline vmaps', () => {
  assert.deepEqual(parseElements('10.0.0.1 . tcp . 80 comment "a, b : c . d" : goto x, 10.0.0.2 : drop'), [
    {key: ['10.0.0.1', 'tcp', '80'], value: 'goto x', comment: 'a, b : c . d'},
    {key: ['10.0.0.2'], value: 'drop'},
  ])
  assert.deepEqual(parseElements(' 0 : goto a , 1 : goto b '), [
    {key: ['0'], value: 'goto a'},
    {key: ['1'], value: 'goto b'},
  ])
  assert.deepEqual(parseElements('tcp . 30000 : 10.244.1.5 . 8080'), [
    {key: ['tcp', '30000'], value: '10.244.1.5 . 8080'},
  ])
  assert.throws(() => parseElements('10.0.0.1 comment "open'), /unterminated quote/)
})

/** kube-proxy's service-ips map with n elements, printed as `nft list ruleset` does: one element per line. */
function serviceIpsMap(n: number): string {
  const lines = [
    'table ip kube-proxy {',
    '\tmap service-ips {',
    '\t\ttype ipv4_addr . inet_proto . inet_service : verdict',
  ]
  for (let i = 0; i < n; i++) {
    const ip = `10.${96 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`
    lines.push(
      `${i === 0 ? '\t\telements = { ' : '\t\t\t     '}${ip} . tcp . 80 comment "ns/svc-${i}:http" : goto service-${i}${i === n - 1 ? ' }' : ','}`,
    )
  }
  lines.push('\t}', '}')
  return lines.join('\n')
}

test('nft text: a multi-line elements list is read in linear time (50,000 elements)', () => {
  const n = 50_000
  // CPU time of ten times the elements: about 10x when linear, about 100x when quadratic (best of two runs each).
  const cpu = (size: number) => {
    const text = serviceIpsMap(size)
    return Math.min(...[0, 1].map(() => cpuTimed(() => NftRuleset.parse(text)).ms))
  }
  const {value: rs} = cpuTimed(() => NftRuleset.parse(serviceIpsMap(n)))
  const map = rs.table('ip kube-proxy')!.sets.get('service-ips')!
  assert.equal(map.elements.length, n)
  assert.deepEqual(map.elements[n - 1], {
    key: ['10.96.195.79', 'tcp', '80'],
    value: `goto service-${n - 1}`,
    comment: `ns/svc-${n - 1}:http`,
  })
  const small = cpu(n / 10)
  const large = cpu(n)
  assert.ok(large < 30 * Math.max(small, 5), `${n / 10} elements: ${small} ms of CPU; ${n}: ${large} ms`)
})

test('nft text: an elements list that is never closed is a parse error naming its line', () => {
  assert.throws(
    () =>
      NftRuleset.parse('table ip t {\n\tset s {\n\t\ttype ipv4_addr\n\t\telements = { 10.0.0.1,\n\t\t\t10.0.0.2,\n'),
    /line 4: .*never closed/,
  )
})
