import assert from 'node:assert/strict'
import {test} from 'node:test'
import {base32, endpointChainName, serviceChainNames, servicePortName} from '../../src/model/chain-names.js'

test('base32 matches RFC 4648 (unpadded)', () => {
  const cases: Array<[string, string]> = [
    ['', ''],
    ['f', 'MY'],
    ['fo', 'MZXQ'],
    ['foo', 'MZXW6'],
    ['foob', 'MZXW6YQ'],
    ['fooba', 'MZXW6YTB'],
    ['foobar', 'MZXW6YTBOI'],
  ]
  for (const [input, want] of cases) assert.equal(base32(Buffer.from(input)), want)
})

test("chain names match kube-proxy's (verified vectors)", () => {
  const cases: Array<[string, string, string]> = [
    ['default/kubernetes:https', 'tcp', 'KUBE-SVC-NPX46M4PTMTKRN6Y'],
    ['kube-system/kube-dns:dns', 'udp', 'KUBE-SVC-TCOU7JCQXEZGVUNU'],
    ['kube-system/kube-dns:dns-tcp', 'tcp', 'KUBE-SVC-ERIFXISQEP7F7OF4'],
    ['kube-system/kube-dns:metrics', 'tcp', 'KUBE-SVC-JD5MR3NA4I4DYORP'],
  ]
  for (const [spn, proto, want] of cases) assert.equal(serviceChainNames(spn, proto).svc, want)
  assert.equal(
    serviceChainNames('kube-system/kube-dns:dns', 'UDP').svc,
    'KUBE-SVC-TCOU7JCQXEZGVUNU',
    'protocol is lower-cased',
  )
})

test('the four per-service chains share one hash; SEP names depend on the endpoint', () => {
  const c = serviceChainNames('shop/web:http', 'tcp')
  const h = c.svc.slice('KUBE-SVC-'.length)
  assert.deepEqual([c.svl, c.ext, c.fw], [`KUBE-SVL-${h}`, `KUBE-EXT-${h}`, `KUBE-FW-${h}`])
  const a = endpointChainName('shop/web:http', 'tcp', '10.0.0.1:80')
  assert.match(a, /^KUBE-SEP-[A-Z2-7]{16}$/)
  assert.notEqual(a, endpointChainName('shop/web:http', 'tcp', '10.0.0.2:80'))
})

test('service port names: unnamed ports have no colon', () => {
  assert.equal(servicePortName('ns', 'svc', ''), 'ns/svc')
  assert.equal(servicePortName('ns', 'svc', undefined), 'ns/svc')
  assert.equal(servicePortName('ns', 'svc', 'http'), 'ns/svc:http')
})

test("nftables chain names match kube-proxy's (verified vectors)", async () => {
  const {nftEndpointChainName, nftServiceChainNames, nftServicePortBase} =
    await import('../../src/model/chain-names.js')
  assert.equal(
    nftServiceChainNames(nftServicePortBase('ns1', 'svc1', 'TCP', 'p80')).service,
    'service-ULMVA6XW-ns1/svc1/tcp/p80',
  )
  assert.equal(nftServiceChainNames('ns2/svc2/tcp/p80').external, 'external-42NFTM6N-ns2/svc2/tcp/p80')
  assert.equal(
    nftEndpointChainName('ns1/svc1/tcp/p80', '10.180.0.1', 80),
    'endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80',
  )
  // IPv6 endpoints, from kube-proxy's knftables dump test of an `ip6 kube-proxy` table.
  assert.equal(
    nftEndpointChainName('ns1/svc1/tcp/p80', 'fd00:10:180::2:1', 80),
    'endpoint-2CRNCTTE-ns1/svc1/tcp/p80__fd00.10.180..2.1/80',
  )
  assert.equal(
    nftEndpointChainName('ns1/svc1/tcp/p80', 'fd00:10:180::1', 80),
    'endpoint-ZVRFLKHO-ns1/svc1/tcp/p80__fd00.10.180..1/80',
  )
})
