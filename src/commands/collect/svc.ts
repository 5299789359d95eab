import {Args, Flags} from '@oclif/core'
import {DoctorCommand} from '../../cli/base-command.js'
import {clusterFlags, liveOptions, verboseLog} from '../../cli/flags.js'
import {progressReporter} from '../../cli/progress.js'
import {gatherLive} from '../../diagnosis/gather.js'
import {checkBundleOut, writeBundle} from '../../diagnosis/write-bundle.js'
import {renderArgv} from '../../model/shell.js'
import {printable} from '../../report/printable.js'
import {COLLECT_EXIT_CODES} from '../../cli/exit-codes.js'

export default class CollectSvc extends DoctorCommand {
  static override summary = 'Record what `svc` reads (API objects and node dumps) as a bundle for --snapshot'
  static override description = COLLECT_EXIT_CODES
  static override examples = ['<%= config.bin %> collect svc web -n shop --out ./web-bundle']
  static override args = {name: Args.string({required: true, description: 'Service name'})}
  static override flags = {
    ...clusterFlags,
    out: Flags.string({
      required: true,
      description: 'new folder to write the bundle to (built beside it, then renamed into place)',
    }),
    force: Flags.boolean({default: false, description: 'replace --out even when it is not empty'}),
    probe: Flags.boolean({
      default: false,
      description:
        "also probe the Service from each node as `svc` does, and record the probes and the kernel's evidence of them (conntrack) beside each node's reads, for --snapshot to replay",
    }),
    'kernel-trace': Flags.boolean({
      default: false,
      dependsOn: ['probe'],
      description:
        "with --probe: record netfilter's own trace of each probe too (as `svc --kernel-trace`: a private nft table marks only the probes' packets, deleted at the end; the commands are printed first)",
    }),
  }

  async run(): Promise<void> {
    const {args, flags} = await this.parse(CollectSvc)
    // Refuse an unusable --out before spending a minute reading the cluster and its nodes.
    checkBundleOut(flags.out, flags.force)
    const progress = progressReporter(flags)
    let g
    try {
      g = await gatherLive(args.name, liveOptions(flags, {log: verboseLog(flags), onProgress: progress?.onProgress}))
    } finally {
      progress?.done()
    }
    writeBundle(
      flags.out,
      g.cluster,
      g.recordings,
      {
        namespace: g.namespace,
        name: args.name,
        context: flags.context,
        observations: g.observations,
        ...(g.probes ? {probes: g.probes} : {}),
      },
      {force: flags.force},
    )
    const bad = g.observations.filter((o) => !o.reachable)
    // Node names come from the API: made printable like every untrusted text on a terminal.
    process.stdout.write(
      printable(
        `wrote ${flags.out}: ${g.observations.length - bad.length} node(s) read${bad.length ? `, ${bad.length} not (${bad.map((o) => o.name).join(', ')})` : ''}`,
      ) + '\n',
    )
    const again = renderArgv(['kproxy-doctor', 'svc', args.name, '-n', g.namespace, '--snapshot', flags.out])
    process.stdout.write(printable(`diagnose it with: ${again}`) + '\n')
  }
}
