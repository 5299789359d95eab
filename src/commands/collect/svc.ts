import {Args, Flags} from '@oclif/core'
import {DoctorCommand} from '../../cli/base-command.js'
import {clusterFlags, liveOptions, verboseLog} from '../../cli/flags.js'
import {progressReporter} from '../../cli/progress.js'
import {gatherLive} from '../../diagnosis/gather.js'
import {checkBundleOut, writeBundle} from '../../diagnosis/write-bundle.js'
import {renderArgv} from '../../model/shell.js'
import {DiagnosisError} from '../../errors.js'
import {collectDocument} from '../../report/document.js'
import {writeCollect} from '../../report/output.js'
import {COLLECT_EXIT_CODES} from '../../cli/exit-codes.js'
import {stderrLine} from '../../cli/stderr.js'

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
    output: Flags.string({
      char: 'o',
      options: ['table', 'json', 'yaml'],
      default: 'table',
      description: 'output format: what was written and read, as a CollectReport document for json and yaml',
    }),
    quiet: Flags.boolean({char: 'q', default: false, description: 'print only the line naming the bundle written'}),
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
    if (flags.quiet && flags.output !== 'table')
      throw new DiagnosisError(
        `--quiet prints only the line naming the bundle: it cannot be combined with -o ${flags.output}`,
      )
    // Refuse an unusable --out before spending a minute reading the cluster and its nodes.
    checkBundleOut(flags.out, flags.force)
    const progress = progressReporter(flags)
    let g
    try {
      g = await gatherLive(args.name, liveOptions(flags, {log: verboseLog(flags), onProgress: progress?.onProgress}))
    } finally {
      progress?.done()
    }
    const {leftOut} = writeBundle(
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
    for (const name of leftOut)
      stderrLine(`warning: node "${name}" has no folder in the bundle: its name is not a Kubernetes node name`)
    const again = ['kproxy-doctor', 'svc', args.name, '-n', g.namespace, '--snapshot', flags.out]
    const document = collectDocument(
      {
        context: flags.context ?? null,
        bundle: flags.out,
        service: {namespace: g.namespace, name: args.name},
        nodes: g.observations.map((o) => ({
          name: o.name,
          read: o.reachable,
          error: o.reachable ? null : (o.error ?? null),
        })),
        next: {command: renderArgv(again), argv: [again]},
      },
      {toolVersion: this.config.version, time: new Date().toISOString()},
    )
    writeCollect(document, {format: flags.output as 'table' | 'json' | 'yaml', quiet: flags.quiet}, (chunk) =>
      process.stdout.write(chunk),
    )
  }
}
