/**
 * Records the README's example bundles from the e2e lab with `kproxy-doctor collect`:
 *   examples/healthy-cluster    every path works
 *   examples/broken-cluster     kube-proxy on node-b stuck before a rollout (old pod IP kept, new pod missing),
 *                               and hairpin off on web-a1's bridge port
 *   examples/dualstack-cluster  web is dual-stack: every IPv4 path works; on node-b the IPv6 endpoint chain of
 *                               web-b1 DNATs to a wrong port
 * Run as root: node dist/test/lab/record-examples.js [ROOT] [NAME…] (default: every example, under examples/)
 */
import {rmSync} from 'node:fs'
import {resolve} from 'node:path'
import {runCli} from '../helpers/run-cli.js'
import {NetnsLab} from './netns-lab.js'

const root = resolve(process.argv[2] ?? 'examples')
const only = process.argv.slice(3)
const wanted = (name: string) => only.length === 0 || only.includes(name)

async function collect(lab: NetnsLab, name: string): Promise<void> {
  const out = resolve(root, name)
  rmSync(out, {recursive: true, force: true})
  const r = await runCli([
    'collect',
    'svc',
    'web',
    '-n',
    'shop',
    '--kubeconfig',
    lab.kubeconfigPath,
    '--ssh-config',
    lab.sshConfigPath,
    '--out',
    out,
  ])
  if (r.code !== 0) throw new Error(r.stderr)
  process.stdout.write(r.stdout)
}

/** One lab for the examples it holds: up, each example recorded in turn, down whatever happened. */
async function inLab(opts: {dualStack?: boolean}, record: (lab: NetnsLab) => Promise<void>): Promise<void> {
  const lab = new NetnsLab(opts)
  try {
    await lab.up()
    await record(lab)
  } finally {
    lab.down()
  }
}

if (wanted('healthy-cluster') || wanted('broken-cluster'))
  await inLab({}, async (lab) => {
    if (wanted('healthy-cluster')) await collect(lab, 'healthy-cluster')
    if (!wanted('broken-cluster')) return
    lab.applyRules('node-b', {omitEndpoint: '10.244.2.11', staleEndpoint: {ip: '10.244.2.7', port: 8080}})
    lab.setHairpin('web-a1', false)
    await collect(lab, 'broken-cluster')
  })
if (wanted('dualstack-cluster'))
  await inLab({dualStack: true}, async (lab) => {
    lab.applyRules('node-b', {}, {wrongPortFor: {ip: 'fd00:10:244:2::10', port: 9999}})
    await collect(lab, 'dualstack-cluster')
  })
