/**
 * Records the README's example bundles from the e2e lab with `kproxy-doctor collect`:
 *   examples/healthy-cluster  every path works
 *   examples/broken-cluster   kube-proxy on node-b stuck before a rollout (old pod IP kept, new pod missing),
 *                             and hairpin off on web-a1's bridge port
 * Run as root: node dist/test/lab/record-examples.js
 */
import {rmSync} from 'node:fs'
import {resolve} from 'node:path'
import {runCli} from '../helpers/run-cli.js'
import {NetnsLab} from './netns-lab.js'

const root = resolve(process.argv[2] ?? 'examples')
const lab = new NetnsLab()
try {
  await lab.up()
  const collect = async (name: string) => {
    const out = resolve(root, name)
    rmSync(out, {recursive: true, force: true})
    const r = await runCli(['collect', 'svc', 'web', '-n', 'shop', '--kubeconfig', lab.kubeconfigPath, '--ssh-config', lab.sshConfigPath, '--out', out])
    if (r.code !== 0) throw new Error(r.stderr)
    process.stdout.write(r.stdout)
  }
  await collect('healthy-cluster')
  lab.applyRules('node-b', {omitEndpoint: '10.244.2.11', staleEndpoint: {ip: '10.244.2.7', port: 8080}})
  lab.setHairpin('web-a1', false)
  await collect('broken-cluster')
} finally {
  lab.down()
}
