import assert from 'node:assert/strict'
import {test} from 'node:test'
import {diagnose} from '../../src/diagnosis/diagnose.js'
import {rulesFromCodes} from '../../src/diagnosis/ignore-rules.js'
import {offlineCluster} from '../helpers/offline-cluster.js'
import {checkFamily, checkTester} from '../helpers/check-tester.js'

checkFamily('hairpin', () => {
  checkTester('the bridge (hairpin.ts)', [
    {
      name: 'hairpin off on a backend port',
      state: {hairpinOff: ['web-b1']},
      findings: [['KPD-HAIRPIN-OFF', 'node-b', 'error']],
      fixes: {
        'KPD-HAIRPIN-OFF node-b': {
          check: [['ssh', '--', 'node-b', 'cat', '/sys/class/net/cbr0/brif/vweb-b1/hairpin_mode']],
          fix: {
            argv: [['ssh', '--', 'node-b', 'sudo', 'bridge', 'link', 'set', 'dev', 'vweb-b1', 'hairpin', 'on']],
            text: null,
            changes: 'node',
            node: 'node-b',
          },
          text: "It is reset when the pod is re-created: set the kubelet's --hairpin-mode=hairpin-veth (or the CNI's hairpinMode: true) on the node.",
        },
      },
    },
    {
      name: 'hairpin off on a port no pod could be matched to',
      state: {
        hairpinOff: ['web-b1'],
        editNetwork: {'node-b': (t) => t.replace(/## neigh[\s\S]*$/, '## neigh\n## fdb\n')},
      },
      findings: [['KPD-HAIRPIN-UNMAPPED', 'node-b', 'warning']],
    },
    {
      name: 'hairpin off on an idle backend (no fdb or neighbour entry) mapped through the CNI result cache: an error',
      state: {
        hairpinOff: ['web-b1'],
        editNetwork: {'node-b': (t) => t.replace(/## neigh[\s\S]*$/, '## neigh\n## fdb\n')},
        cniCache: {'node-b': (t) => t},
      },
      findings: [['KPD-HAIRPIN-OFF', 'node-b', 'error']],
      fixes: {
        'KPD-HAIRPIN-OFF node-b': {
          check: [['ssh', '--', 'node-b', 'cat', '/sys/class/net/cbr0/brif/vweb-b1/hairpin_mode']],
          fix: {
            argv: [['ssh', '--', 'node-b', 'sudo', 'bridge', 'link', 'set', 'dev', 'vweb-b1', 'hairpin', 'on']],
            text: null,
            changes: 'node',
            node: 'node-b',
          },
          text: "It is reset when the pod is re-created: set the kubelet's --hairpin-mode=hairpin-veth (or the CNI's hairpinMode: true) on the node.",
        },
      },
    },
    {
      name: 'hairpin off, no fdb, and a CNI result cache that is truncated: the file is skipped, the warning stays',
      state: {
        hairpinOff: ['web-b1'],
        editNetwork: {'node-b': (t) => t.replace(/## neigh[\s\S]*$/, '## neigh\n## fdb\n')},
        cniCache: {
          'node-b': (t) =>
            t
              .split('\n')
              .map((l) => l.slice(0, 200))
              .join('\n'),
        },
      },
      findings: [['KPD-HAIRPIN-UNMAPPED', 'node-b', 'warning']],
    },
    {
      name: 'hairpin off, the FDB not read (bridge not on the node): the backend is unmapped, a warning, never a pod taken for mapped nowhere',
      state: {
        hairpinOff: ['web-b1'],
        editNetwork: {
          'node-b': (t) =>
            t.replace(/## fdb[\s\S]*$/, '## fdb\n#kpd-not-read 127\tbridge fdb show\t/bin/sh: 1: bridge: not found\n'),
        },
      },
      findings: [['KPD-HAIRPIN-UNMAPPED', 'node-b', 'warning']],
    },
    {
      name: 'hairpin off on the port of a pod the cache maps, the links not read (ip failed): whether its bridge is promiscuous is unknown, so nothing said',
      state: {
        hairpinOff: ['web-b1'],
        cniCache: {'node-b': (t) => t},
        editNetwork: {
          'node-b': (t) =>
            t.replace(
              /## links[\s\S]*?## neigh/,
              '## links\n#kpd-not-read 1\tip -o link show\tCannot open netlink socket\n## neigh',
            ),
        },
      },
      findings: [],
    },
    {
      name: 'hairpin off on the bridge port of a pod the cache maps, bridge promiscuous: nothing',
      state: {
        hairpinOff: ['web-b1'],
        cniCache: {'node-b': (t) => t},
        editNetwork: {
          'node-b': (t) =>
            t
              .replace('<BROADCAST,MULTICAST,UP,LOWER_UP>', '<BROADCAST,MULTICAST,PROMISC,UP,LOWER_UP>')
              .replace(/## neigh[\s\S]*$/, '## neigh\n## fdb\n'),
        },
      },
      findings: [],
    },
  ])

  test('--ignore: a silenced code also silences the generic path finding for its step', () => {
    const {cluster, observations} = offlineCluster({hairpinOff: ['web-b1']})
    const d = diagnose(cluster, observations, {ignore: rulesFromCodes(['KPD-HAIRPIN-OFF'])})
    assert.deepEqual(d.findings, [])
    assert.deepEqual(
      d.ignored.map((f) => `${f.code} ${f.node}`),
      ['KPD-HAIRPIN-OFF node-b'],
    )
    assert.equal(d.ok, true)
    assert.deepEqual([...d.ignoredBreaks.values()], ['KPD-HAIRPIN-OFF'])
  })
})
