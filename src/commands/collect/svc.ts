import {Args, Command, Flags} from '@oclif/core'
import {clusterFlags, failWith, splitList} from '../../cli/flags.js'
import {gatherLive} from '../../diagnosis/gather.js'

export default class CollectSvc extends Command {
  static override summary = 'Record what `svc` reads (API objects and node dumps) as a bundle for --snapshot'
  static override examples = ['<%= config.bin %> collect svc web -n shop --out ./web-bundle']
  static override args = {name: Args.string({required: true, description: 'Service name'})}
  static override flags = {
    ...clusterFlags,
    out: Flags.string({required: true, description: 'folder to write the bundle to'}),
  }

  async run(): Promise<void> {
    const {args, flags} = await this.parse(CollectSvc)
    try {
      const g = await gatherLive({
        name: args.name,
        namespace: flags.namespace,
        kubeconfig: flags.kubeconfig,
        context: flags.context,
        sshConfig: flags['ssh-config'],
        nodes: splitList(flags.nodes),
        allNodes: flags['all-nodes'],
        insecureIgnoreHostKey: flags['insecure-ignore-host-key'],
        timeoutMs: flags.timeout * 1000,
        concurrency: flags.concurrency,
        outDir: flags.out,
      })
      const bad = g.observations.filter((o) => !o.reachable)
      process.stdout.write(`wrote ${flags.out}: ${g.observations.length - bad.length} node(s) read${bad.length ? `, ${bad.length} not (${bad.map((o) => o.name).join(', ')})` : ''}\n`)
      process.stdout.write(`diagnose it with: kproxy-doctor svc ${args.name} -n ${g.namespace} --snapshot ${flags.out}\n`)
    } catch (e) {
      failWith(e)
    }
  }
}
