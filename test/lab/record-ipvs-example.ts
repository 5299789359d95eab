/**
 * Writes examples/ipvs-cluster: the healthy example's API objects with both nodes in IPVS mode, node-b's real server
 * for web-b2 stuck at weight 0 (kubernetes #92019). IPVS cannot run in this kernel, so ipvsadm and `ip addr` text is
 * written in the tools' exact formats; when run as root, the ipset dump is passed through the real `ipset`
 * (restore into a throw-away network namespace, then save) so it is the tool's own output.
 * Run: node dist/test/lab/record-ipvs-example.js [examples]
 */
import {cpSync, mkdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {join, resolve} from 'node:path'
import {kubeProxyIpvsTexts, type IpvsFaults} from '../fixtures/kube-proxy-ipvs.js'
import {NODES, SERVICES, labPods} from '../fixtures/lab-cluster.js'
import {tryRun} from './sh.js'

const root = resolve(process.argv[2] ?? 'examples')
const out = join(root, 'ipvs-cluster')
rmSync(out, {recursive: true, force: true})
cpSync(join(root, 'healthy-cluster'), out, {recursive: true})

function throughRealIpset(text: string): string {
  if (process.getuid?.() !== 0) return text
  const ns = `kpdipset${process.pid}`
  if (tryRun('ip', ['netns', 'add', ns]).code !== 0) return text
  try {
    const restored = tryRun('ip', ['netns', 'exec', ns, 'ipset', 'restore'], text)
    if (restored.code !== 0) throw new Error(`ipset restore refused the dump: ${restored.stderr}`)
    return tryRun('ip', ['netns', 'exec', ns, 'ipset', 'save']).stdout
  } finally {
    tryRun('ip', ['netns', 'del', ns])
  }
}

// The cluster's kube-proxy configuration says IPVS too.
const cm = join(out, 'configmaps.json')
writeFileSync(cm, readFileSync(cm, 'utf8').replace('mode: \\"iptables\\"', 'mode: \\"ipvs\\"'))

const faults: Record<string, IpvsFaults> = {'node-a': {}, 'node-b': {weightZeroFor: '10.244.2.11'}}
for (const node of NODES) {
  const dir = join(out, 'nodes', node.name)
  mkdirSync(dir, {recursive: true})
  for (const f of ['nft-ruleset.txt', 'iptables-nft-save.txt', 'iptables-legacy-save.txt'])
    rmSync(join(dir, f), {force: true})
  const t = kubeProxyIpvsTexts(node, SERVICES, labPods(), faults[node.name])
  writeFileSync(join(dir, 'iptables-save.txt'), t.iptablesSave)
  writeFileSync(join(dir, 'ipvsadm.txt'), node.name === 'node-a' ? t.ipvsadmSave : t.ipvsadmList)
  writeFileSync(join(dir, 'ipset.txt'), throughRealIpset(t.ipsetSave))
  writeFileSync(join(dir, 'kube-ipvs0.txt'), t.kubeIpvs0)
  writeFileSync(join(dir, 'sysctl.txt'), t.sysctl)
  writeFileSync(
    join(dir, 'kube-proxy.json'),
    JSON.stringify({proxyMode: 'ipvs', healthz: {status: 200}, metrics: {}}, null, 2) + '\n',
  )
}
process.stdout.write(`wrote ${out}\n`)
