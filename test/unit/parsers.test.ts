import assert from 'node:assert/strict'
import {test} from 'node:test'
import {parseKubeProxyConfig} from '../../src/cluster/kube-proxy-config.js'
import {editDistance, similarNames} from '../../src/cluster/similar-names.js'
import * as dnsPacket from 'dns-packet'
import {buildQuery, parseResponse} from '../../src/node/probe/dns-probe.js'
import {parseLookupOutput} from '../../src/parse/dns-lookup.js'
import {parseBridgeState} from '../../src/parse/bridge-state.js'
import {IpsetState} from '../../src/parse/ipset-save.js'

test('kube-proxy config: mode, clusterCIDR, masquerade settings; defaults when absent', () => {
  const c = parseKubeProxyConfig(
    'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nclusterCIDR: "10.244.0.0/16"\niptables:\n  masqueradeAll: true\n  masqueradeBit: 15  # custom\nipvs:\n  masqueradeBit: 3\nmode: ipvs\n',
    'cm',
  )
  assert.deepEqual(c, {
    mode: 'ipvs',
    clusterCIDR: '10.244.0.0/16',
    masqueradeBit: 15,
    masqueradeAll: true,
    localhostNodePorts: true,
    source: 'cm',
  })
  const d = parseKubeProxyConfig('kind: KubeProxyConfiguration\nmode: ""\n', 'cm')
  assert.equal(d.mode, '')
  assert.equal(d.masqueradeBit, 14)
})

test('DNS messages (dns-packet): the query asks one type of one name; replies with A and AAAA records, NXDOMAIN, a foreign id, truncation', () => {
  const name = 'web.shop.svc.cluster.local'
  const q = buildQuery(name, 'AAAA', 0x1234)
  const asked = dnsPacket.decode(q)
  assert.deepEqual(
    [asked.id, asked.type, asked.flag_rd, asked.questions],
    [0x1234, 'query', true, [{name, type: 'AAAA', class: 'IN'}]],
  )
  assert.equal(dnsPacket.decode(buildQuery(name, 'A', 7)).questions?.[0].type, 'A')

  const reply = (id: number, rcode: number, answers: dnsPacket.Answer[], flags = 0) =>
    dnsPacket.encode({
      type: 'response',
      id,
      flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | flags | rcode,
      questions: asked.questions,
      answers,
    })
  // A server may answer a name's other records too, and a CNAME on the way: only the asked type's addresses count.
  const both = reply(0x1234, 0, [
    {type: 'CNAME', name, ttl: 5, data: 'web-alias.shop.svc.cluster.local'},
    {type: 'A', name, ttl: 5, data: '10.96.10.10'},
    {type: 'AAAA', name, ttl: 5, data: 'fd00:10:96:0:0:0:10:10'},
    {type: 'AAAA', name, ttl: 5, data: 'fd00:10:96::10:11'},
  ])
  assert.deepEqual(parseResponse(both, 'AAAA', 0x1234), {
    rcode: 'NOERROR',
    addresses: ['fd00:10:96::10:10', 'fd00:10:96::10:11'],
  })
  assert.deepEqual(parseResponse(both, 'A', 0x1234), {rcode: 'NOERROR', addresses: ['10.96.10.10']})
  // A name with an A record and no AAAA: NOERROR, no address.
  assert.deepEqual(parseResponse(reply(0x1234, 0, []), 'AAAA', 0x1234), {rcode: 'NOERROR', addresses: []})
  assert.deepEqual(parseResponse(reply(0x1234, 3, []), 'AAAA', 0x1234), {rcode: 'NXDOMAIN', addresses: []})
  assert.deepEqual(parseResponse(reply(0x1234, 2, []), 'A', 0x1234), {rcode: 'SERVFAIL', addresses: []})
  assert.throws(() => parseResponse(both, 'AAAA', 0x9999), /foreign id/)
  assert.throws(() => parseResponse(q, 'AAAA', 0x1234), /not a reply/)
  assert.throws(() => parseResponse(both.subarray(0, both.length - 6), 'AAAA', 0x1234), /malformed DNS reply/)
  assert.throws(() => parseResponse(both.subarray(0, 5), 'AAAA', 0x1234), /malformed DNS reply/)
  assert.throws(
    () => parseResponse(reply(0x1234, 0, [], dnsPacket.TRUNCATED_RESPONSE), 'A', 0x1234),
    /truncated DNS reply/,
  )
})

test('dig +short and nslookup output: the addresses of the asked type, never the server nslookup names first', () => {
  assert.deepEqual(parseLookupOutput('10.96.10.10\n', 'A'), ['10.96.10.10'])
  assert.deepEqual(parseLookupOutput('10.96.10.10\n', 'AAAA'), [])
  assert.deepEqual(parseLookupOutput('fd00:10:96::10:10\n', 'AAAA'), ['fd00:10:96::10:10'])
  assert.deepEqual(parseLookupOutput('web-alias.shop.svc.cluster.local.\nfd00:10:96:0::10:10\n', 'AAAA'), [
    'fd00:10:96::10:10',
  ])
  assert.deepEqual(
    parseLookupOutput(
      'Server:\t\t10.96.0.10\nAddress:\t10.96.0.10#53\n\nName:\tweb.shop.svc.cluster.local\nAddress: 10.96.10.10\n',
      'A',
    ),
    ['10.96.10.10'],
  )
  const v6 =
    'Server:\t\tfd00:10:96::a\nAddress:\tfd00:10:96::a#53\n\nName:\tweb.shop.svc.cluster.local\nAddress: fd00:10:96::10:10\n'
  assert.deepEqual(parseLookupOutput(v6, 'AAAA'), ['fd00:10:96::10:10'])
  // busybox numbers its answers.
  assert.deepEqual(
    parseLookupOutput(
      'Server: 10.96.0.10\nAddress 1: 10.96.0.10 kube-dns\n\nName: web.shop\nAddress 1: fd00:10:96::10:10\n',
      'AAAA',
    ),
    ['fd00:10:96::10:10'],
  )
  assert.deepEqual(parseLookupOutput("** server can't find web.shop.svc.cluster.local: NXDOMAIN\n", 'A'), [])
})

test('bridge state: hairpin flags, promiscuous bridges, pod IP to port through neigh and fdb', () => {
  const s = parseBridgeState(
    [
      '## hairpin',
      '/sys/class/net/cni0/brif/veth1/hairpin_mode 1',
      '/sys/class/net/cni0/brif/veth2/hairpin_mode 0',
      '/sys/class/net/cbr0/brif/veth3/hairpin_mode 0',
      '## links',
      '4: cni0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1450 qdisc noqueue state UP',
      '5: cbr0: <BROADCAST,MULTICAST,PROMISC,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP',
      '6: veth2@if3: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1450 master cni0',
      '## neigh',
      '10.244.0.7 dev cni0 lladdr aa:bb:cc:dd:ee:02 REACHABLE',
      '10.244.0.8 dev cni0 lladdr aa:bb:cc:dd:ee:09 STALE',
      '## fdb',
      'aa:bb:cc:dd:ee:02 dev veth2 master cni0',
      'aa:bb:cc:dd:ee:ff dev veth1 master cni0 permanent',
    ].join('\n'),
  )
  assert.deepEqual(
    s.ports.map((p) => `${p.bridge}/${p.port}=${p.hairpin}`),
    ['cni0/veth1=true', 'cni0/veth2=false', 'cbr0/veth3=false'],
  )
  assert.deepEqual([...s.promiscuousBridges], ['cbr0'])
  assert.deepEqual([...s.portOfIp], [['10.244.0.7', 'veth2']])
})

test('ipset save: members of hash:ip,port and hash:net sets', () => {
  const s = IpsetState.parse(
    'create A hash:ip,port family inet\nadd A 10.96.0.1,tcp:443\ncreate N hash:net family inet\nadd N 10.0.0.0/8\n',
  )
  const p = {src: '10.1.2.3', dst: '10.96.0.1', proto: 'tcp', dport: 443, sport: 5}
  assert.equal(s.matches('A', 'dst,dst', p), true)
  assert.equal(s.matches('A', 'dst,dst', {...p, proto: 'udp'}), false)
  assert.equal(s.matches('N', 'src', p), true)
  assert.equal(s.matches('missing', 'src', p), undefined)
  assert.throws(() => IpsetState.parse('nonsense\n'), /line 1/)
})

test('similar names for "did you mean"', () => {
  assert.equal(editDistance('kitten', 'sitting'), 3)
  assert.deepEqual(similarNames('web', ['web-api', 'wbe', 'db', 'cache']), ['wbe', 'web-api'])
  assert.equal(editDistance('wbe', 'web'), 1)
  assert.deepEqual(similarNames('zzz', ['web']), [])
})
