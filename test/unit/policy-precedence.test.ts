/**
 * The precedence engine itself (model/policy-precedence.ts), where the case tables cannot show it: verdicts that are
 * unsure (ANPs not read, a client's unknown labels) are never "allowed", and who decided is named.
 */
import assert from 'node:assert/strict'
import {test} from 'node:test'
import type {AdminNetworkPolicy} from '../../src/cluster/admin-policy-objects.js'
import type {PolicyDestination, PolicySource} from '../../src/model/network-policy.js'
import {judgeWithPrecedence, type PrecedenceWorld} from '../../src/model/policy-precedence.js'

const web: PolicyDestination = {
  namespace: 'shop',
  name: 'web-a1',
  ip: '10.244.1.10',
  labels: {app: 'web'},
  containerPorts: [{name: 'http', containerPort: 8080}],
}
const curl: PolicySource = {
  kind: 'pod',
  namespace: 'client',
  name: 'curl',
  ip: '10.244.1.200',
  labels: {app: 'curl'},
  hostNetwork: false,
}
const anyOfClient: PolicySource = {kind: 'namespace', namespace: 'client'}
const node: PolicySource = {kind: 'host', node: 'node-a', ip: '10.200.0.11'}
const port = {port: 8080, protocol: 'TCP'}
const namespaceLabels = {
  shop: {'kubernetes.io/metadata.name': 'shop'},
  client: {'kubernetes.io/metadata.name': 'client', team: 'blue'},
}
const allowAll = {metadata: {namespace: 'shop', name: 'allow-all'}, spec: {podSelector: {}, ingress: [{}]}}
const world = (anps: AdminNetworkPolicy[], unread = false): PrecedenceWorld => ({
  policies: [allowAll],
  namespaceLabels,
  admin: {anps, unread},
})
const denyCurlEgress: AdminNetworkPolicy = {
  metadata: {name: 'curl-out'},
  spec: {
    priority: 1,
    subject: {pods: {namespaceSelector: {}, podSelector: {matchLabels: {app: 'curl'}}}},
    egress: [{name: 'no-shop', action: 'Deny', to: [{namespaces: {}}]}],
  },
}

test('ANPs not read: the NetworkPolicies allow, yet the verdict is unsure (never "allowed"), decided as far as read by them', () => {
  const v = judgeWithPrecedence(world([], true), 'ingress', curl, web, port)
  assert.equal(v.allowed, undefined)
  assert.equal(v.withoutAdmin, true)
  assert.deepEqual(v.decidedBy, {tier: 'network-policy'})
  assert.equal(v.adminUnread, true)
  assert.equal(judgeWithPrecedence(world([]), 'ingress', curl, web, port).allowed, true)
})

test('a subject by Pod labels, for any Pod of a namespace (labels unknown): unsure, no decider; for curl itself: the Deny', () => {
  const unsure = judgeWithPrecedence(world([denyCurlEgress]), 'egress', anyOfClient, web, port)
  assert.equal(unsure.allowed, undefined)
  assert.equal(unsure.decidedBy, undefined)
  const denied = judgeWithPrecedence(world([denyCurlEgress]), 'egress', curl, web, port)
  assert.equal(denied.allowed, false)
  assert.equal(denied.decidedBy?.tier, 'admin')
})

test("a node's own traffic: no ANP subject (host network) nor namespaces/pods peer takes it", () => {
  const denyEveryone: AdminNetworkPolicy = {
    metadata: {name: 'deny-everyone'},
    spec: {priority: 1, subject: {namespaces: {}}, ingress: [{action: 'Deny', from: [{namespaces: {}}]}]},
  }
  assert.equal(judgeWithPrecedence(world([denyEveryone]), 'ingress', node, web, port).allowed, true)
  assert.equal(judgeWithPrecedence(world([denyEveryone]), 'ingress', curl, web, port).allowed, false)
  assert.equal(judgeWithPrecedence(world([denyCurlEgress]), 'egress', node, web, port).decidedBy?.tier, 'none')
})

test('a peer of a kind this version does not know fails closed: an Allow takes nothing, a Deny everything', () => {
  const unknown = (action: string): AdminNetworkPolicy => ({
    metadata: {name: `unknown-${action}`},
    spec: {priority: 1, subject: {namespaces: {}}, ingress: [{action, from: [{} as never]}]},
  })
  assert.equal(judgeWithPrecedence(world([unknown('Deny')]), 'ingress', curl, web, port).allowed, false)
  const allow = judgeWithPrecedence(world([unknown('Allow')]), 'ingress', curl, web, port)
  assert.deepEqual([allow.allowed, allow.decidedBy?.tier], [true, 'network-policy'])
})
