/**
 * The two entry points from outside to a Service's own addresses (outside→LoadBalancer: its first
 * status.loadBalancer.ingress IP; outside→externalIP: its first spec.externalIPs), walked on the lab's iptables rules:
 * which node and entry break, and at which step, when kube-proxy missed one of them.
 */
import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {PROBES_OFF} from '../../src/diagnosis/probe-stage.js'
import {offlineCluster, type OfflineOptions} from '../helpers/offline-cluster.js'
import type {LabService} from '../fixtures/lab-cluster.js'

const EXPOSED: Partial<LabService> = {
  type: 'LoadBalancer',
  externalIPs: ['192.0.2.50'],
  loadBalancerIPs: ['192.0.2.80'],
}

/** Each outside→LoadBalancer / outside→externalIP walk as "node entry: ok" or "node entry: breaks at STEP". */
function externalWalks(state: OfflineOptions): string[] {
  const {cluster, observations} = offlineCluster(state)
  return diagnose(cluster, observations, {probes: PROBES_OFF})
    .paths.filter((p) => p.entry === 'outside→LoadBalancer' || p.entry === 'outside→externalIP')
    .map((p) => `${p.node} ${p.entry}: ${p.breaksAt === null ? 'ok' : `breaks at ${p.breaksAt}`}`)
    .sort()
}

const ALL_OK = [
  'node-a outside→LoadBalancer: ok',
  'node-a outside→externalIP: ok',
  'node-b outside→LoadBalancer: ok',
  'node-b outside→externalIP: ok',
]

describe('outside→LoadBalancer and outside→externalIP walks', () => {
  test('healthy: both entries reach the Service on both nodes', () => {
    assert.deepEqual(externalWalks({web: EXPOSED}), ALL_OK)
  })
  test('externalTrafficPolicy Local: both entries still reach the node-local endpoints', () => {
    assert.deepEqual(externalWalks({web: {...EXPOSED, externalTrafficPolicy: 'Local'}}), ALL_OK)
  })
  test("loadBalancerSourceRanges that leave the doctor's outside client out: walked from inside them, healthy", () => {
    assert.deepEqual(externalWalks({web: {...EXPOSED, loadBalancerSourceRanges: ['10.200.0.0/24']}}), ALL_OK)
  })
  test('a missing LoadBalancer IP rule breaks only that entry, on that node, at service-match', () => {
    assert.deepEqual(externalWalks({web: EXPOSED, faults: {'node-b': {omitLoadBalancerIp: true}}}), [
      'node-a outside→LoadBalancer: ok',
      'node-a outside→externalIP: ok',
      'node-b outside→LoadBalancer: breaks at service-match',
      'node-b outside→externalIP: ok',
    ])
  })
  test('a missing external IP rule breaks only that entry, on that node, at service-match', () => {
    assert.deepEqual(externalWalks({web: EXPOSED, faults: {'node-a': {omitExternalIp: true}}}), [
      'node-a outside→LoadBalancer: ok',
      'node-a outside→externalIP: breaks at service-match',
      'node-b outside→LoadBalancer: ok',
      'node-b outside→externalIP: ok',
    ])
  })
  test("a source-range firewall refusing the Service's own range breaks the LoadBalancer entry at the filter", () => {
    const web = {...EXPOSED, loadBalancerSourceRanges: ['10.200.0.0/24']}
    assert.deepEqual(externalWalks({web, faults: {'node-a': {wrongSourceRanges: ['198.51.100.0/24']}}}), [
      'node-a outside→LoadBalancer: breaks at filter',
      'node-a outside→externalIP: ok',
      'node-b outside→LoadBalancer: ok',
      'node-b outside→externalIP: ok',
    ])
  })
})
