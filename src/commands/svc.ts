import {Args, Command, Flags} from '@oclif/core'
import {clusterFlags, failWith, liveOptions, splitList} from '../cli/flags.js'
import {checkIgnoreCodes, diagnose} from '../diagnosis/diagnose.js'
import type {ProxyMode} from '../model/modes/index.js'
import {gatherLive, gatherSnapshot} from '../diagnosis/gather.js'
import {DiagnosisError} from '../errors.js'
import {makeChalk, renderHuman} from '../report/human.js'
import {buildReport, exitCode} from '../report/report.js'

export default class Svc extends Command {
  static override summary = 'Diagnose one Service: where its packet path breaks, on which node, and what to run next'
  static override examples = [
    '<%= config.bin %> svc web -n shop',
    '<%= config.bin %> svc web -n shop -o json --nodes node-a,node-b',
    '<%= config.bin %> svc web -n shop --snapshot examples/broken-cluster',
  ]
  static override args = {name: Args.string({required: true, description: 'Service name'})}
  static override flags = {
    ...clusterFlags,
    output: Flags.string({char: 'o', options: ['table', 'json'], default: 'table', description: 'output format'}),
    snapshot: Flags.string({description: 'diagnose a recorded bundle (see `collect svc`) instead of a live cluster'}),
    explain: Flags.boolean({description: 'show the rule-by-rule trace behind each broken path', default: false}),
    ignore: Flags.string({description: 'finding codes to silence (comma-separated)'}),
    'proxy-mode': Flags.string({options: ['iptables', 'nftables', 'ipvs'], description: 'judge every node in this kube-proxy mode, whatever kube-proxy and the rules say'}),
  }

  async run(): Promise<void> {
    const {args, flags} = await this.parse(Svc)
    try {
      checkIgnoreCodes(splitList(flags.ignore))
      const g = flags.snapshot ? await gatherSnapshot(flags.snapshot, flags.namespace ?? 'default', args.name, splitList(flags.nodes)) : await gatherLive(liveOptions(args.name, flags))
      for (const w of g.warnings) process.stderr.write(`kproxy-doctor: warning: ${w}\n`)
      const d = diagnose(g.cluster, g.observations, {ignore: splitList(flags.ignore), proxyMode: flags['proxy-mode'] as ProxyMode | undefined})
      if (d.context.nodes.length === 0 && d.context.unsupported.length === 0 && !d.context.service.notProxied)
        throw new DiagnosisError(`no node could be read: ${g.observations.map((o) => `${o.name}: ${o.error}`).join('; ')}`)
      const report = buildReport(d, {explain: flags.explain, notes: g.selectionNote ? [g.selectionNote] : []})
      if (flags.output === 'json') process.stdout.write(JSON.stringify(report, null, 2) + '\n')
      else process.stdout.write(renderHuman(report, makeChalk(process.stdout)) + '\n')
      process.exitCode = exitCode(report)
    } catch (e) {
      failWith(e)
    }
  }
}
