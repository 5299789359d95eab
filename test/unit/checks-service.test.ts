import type {V1Pod} from '@kubernetes/client-node'
import type {NodeObservation} from '../../src/node/observation.js'
import {checkFamily, checkTester} from '../helpers/check-tester.js'
import {labPods} from '../fixtures/lab-cluster.js'
import {kubeProxyStatus, notReady, now} from '../helpers/check-states.js'

const healthy: NodeObservation['kubeProxy'] = {
  proxyMode: 'iptables',
  healthz: {
    status: 200,
    lastUpdated: new Date().toISOString(),
    currentTime: new Date().toISOString(),
    nodeEligible: true,
  },
  metrics: {
    kubeproxy_sync_proxy_rules_last_timestamp_seconds: now,
    kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds: now,
    kubeproxy_sync_proxy_rules_iptables_restore_failures_total: 0,
  },
}

checkFamily('service', () => {
  checkTester('a healthy lab', [
    {name: 'iptables on both nodes: no finding at all', state: {}, findings: []},
    {name: 'ClientIP affinity programmed as asked', state: {web: {affinitySeconds: 10800}}, findings: []},
    {
      name: 'externalTrafficPolicy Local with a node without local endpoints (drops by design)',
      state: {web: {externalTrafficPolicy: 'Local'}, pods: notReady('web-a1')},
      findings: [['KPD-ENDPOINT-NOT-READY', 'node-a', 'warning']],
    },
    {
      name: 'IPVS on both nodes, as configured',
      state: {ipvs: {'node-a': {}, 'node-b': {}}, editCluster: (c) => void (c.proxyConfig.mode = 'ipvs')},
      findings: [],
    },
    {
      name: 'kube-proxy healthy and in sync on both nodes',
      state: {editObservation: {'node-a': kubeProxyStatus(healthy), 'node-b': kubeProxyStatus(healthy)}},
      findings: [],
    },
  ])

  checkTester(
    'the Service and its endpoints (not-proxied, selector-no-pods, no-ready-endpoints, target-port, endpoint-not-ready)',
    [
      {
        name: 'headless Service: nothing to judge, said so',
        state: {editCluster: (c) => void (c.service.spec!.clusterIP = 'None')},
        findings: [['KPD-NOT-PROXIED', '-', 'info']],
      },
      {
        name: 'selector matches nothing',
        state: {pods: labPods().map((p) => (p.kind === 'web' ? {...p, labels: {app: 'webb'}} : p))},
        findings: [['KPD-SELECTOR-NO-PODS', '-', 'error']],
        fixes: {
          'KPD-SELECTOR-NO-PODS -': {
            check: [['kubectl', '-n', 'shop', 'get', 'pods', '--show-labels']],
            fix: null,
            text: "Compare the Pods' labels with the selector app=web.",
          },
        },
      },
      {
        name: 'all backends not ready',
        state: {pods: notReady('web-a1', 'web-b1', 'web-b2')},
        findings: [['KPD-NO-READY-ENDPOINTS', '-', 'error']],
      },
      {
        name: 'one backend not ready',
        state: {pods: notReady('web-b2')},
        findings: [['KPD-ENDPOINT-NOT-READY', 'node-b', 'warning']],
        fixes: {
          'KPD-ENDPOINT-NOT-READY node-b': {
            check: [['kubectl', '-n', 'shop', 'describe', 'pod', 'web-b2']],
            fix: null,
            text: null,
          },
        },
      },
      {
        name: 'named targetPort missing on one pod',
        state: {pods: labPods().map((p) => (p.name === 'web-a1' ? {...p, portName: 'web'} : p))},
        findings: [['KPD-TARGETPORT-NOT-EXPOSED', '-', 'error']],
      },
      {
        name: 'numeric targetPort one pod does not declare',
        state: {
          editCluster: (c) => {
            c.service.spec!.ports![0].targetPort = 8080
            const b2 = c.pods.find((p: V1Pod) => p.metadata?.name === 'web-b2')!
            for (const container of b2.spec!.containers) container.ports = [{containerPort: 9090, name: 'metrics'}]
          },
        },
        findings: [['KPD-TARGETPORT-UNDECLARED', '-', 'warning']],
      },
    ],
  )
})
