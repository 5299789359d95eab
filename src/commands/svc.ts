import {Args, Flags} from '@oclif/core'
import {DoctorCommand} from '../cli/base-command.js'
import {stderrLine} from '../cli/stderr.js'
import {ignoreFlags, ignoreRules} from '../cli/ignore-config.js'
import {
  clientFlags,
  clusterFlags,
  failOnFlag,
  LIVE_ONLY_FLAGS,
  liveOptions,
  parseClientFlags,
  probeFlags,
  proxyModeFlag,
  splitList,
  verboseLog,
} from '../cli/flags.js'
import {progressReporter} from '../cli/progress.js'
import {currentContext} from '../cli/kube-context.js'
import {diagnose} from '../diagnosis/diagnose.js'
import {policySourcesNote} from '../checks/rules/policy-sources.js'
import type {ProxyMode} from '../model/modes/index.js'
import {gatherLive, gatherSnapshot, type GatheredLive, type LiveRound} from '../diagnosis/gather.js'
import {PROBES_OFF, PROBES_SNAPSHOT} from '../diagnosis/probe-stage.js'
import {DiagnosisError} from '../errors.js'
import {withReadVia} from '../report/document.js'
import {apiOnlyNote} from '../report/read-via.js'
import {makeChalk} from '../report/human.js'
import {writeHtml, writeMermaid, writeServiceReport, writeWatchReport} from '../report/output.js'
import {outputWidth} from '../report/width.js'
import {buildReport, exitCode, parseFailOn} from '../report/report.js'
import {DIAGNOSIS_EXIT_CODES} from '../cli/exit-codes.js'
import {explainValueAsFormat} from '../cli/explain-value.js'

/** How often --watch reads the nodes' rules again without a change, unless --watch-interval says. */
const WATCH_INTERVAL_SECONDS = 10

const OUTPUT = 'OUTPUT'
const DIAGNOSIS = 'DIAGNOSIS'
/** --watch: at most one diagnosis in this many ms; changes that come sooner are diagnosed together. */
const WATCH_GAP_MS = 2000
/**
 * --watch: a break seen right after an API change that makes kube-proxy reprogram is read again after this long before
 * it is printed (kube-proxy's default minSyncPeriod is 1 s, and a sync takes a moment more on a large node).
 */
const WATCH_SETTLE_MS = 2000

export default class Svc extends DoctorCommand {
  static override summary = 'Diagnose one Service: where its packet path breaks, on which node, and what to run next'
  static override description = DIAGNOSIS_EXIT_CODES
  static override usage = [
    'svc NAME [-n NAMESPACE] [--context CTX] [--kubeconfig FILE] [--ssh-config FILE] [--nodes a,b | --all-nodes] [--no-probe] [--fail-on error,warning,incomplete|none] [--all-rules] [-o table|json|yaml|junit|mermaid|html] [-q | --explain [--explain-format text|tree]]',
    'svc NAME [-n NAMESPACE] --snapshot DIR [--nodes a,b] [-o table|json|yaml|junit|mermaid|html] [-q | --explain [--explain-format text|tree]]',
  ]
  static override examples = [
    '<%= config.bin %> svc web -n shop',
    '<%= config.bin %> svc web -n shop -o json --nodes node-a,node-b',
    '<%= config.bin %> collect svc web -n shop --out ./web-bundle && <%= config.bin %> svc web -n shop --snapshot ./web-bundle',
  ]
  static override args = {name: Args.string({required: true, description: 'Service name'})}
  static override flags = {
    ...clusterFlags,
    ...probeFlags,
    output: Flags.string({
      char: 'o',
      options: ['table', 'json', 'yaml', 'junit', 'mermaid', 'html'],
      default: 'table',
      description:
        'output format (mermaid: the packet paths as a flowchart; html: one self-contained page with them drawn)',
      helpGroup: OUTPUT,
    }),
    quiet: Flags.boolean({
      char: 'q',
      description: 'print only the headline (the exit code tells the rest)',
      default: false,
      helpGroup: OUTPUT,
      exclusive: ['explain'],
    }),
    explain: Flags.boolean({
      description: 'show the rule-by-rule trace behind each broken path',
      default: false,
      helpGroup: OUTPUT,
    }),
    'explain-format': Flags.string({
      description:
        'with --explain: text (the walks behind the broken paths, flat and numbered) or tree (every node and entry point as a tree of the rules crossed, the break marked ✗ with its reason and fix)',
      options: ['text', 'tree'],
      helpGroup: OUTPUT,
    }),
    snapshot: Flags.string({
      description: 'diagnose a recorded bundle (see `collect svc`) instead of a live cluster',
      helpGroup: 'CLUSTER',
      exclusive: LIVE_ONLY_FLAGS,
    }),
    watch: Flags.boolean({
      description:
        "keep watching the Service, its EndpointSlices and Pods and the nodes' kube-proxy (or agent) Pods, diagnose again on a change (at most every 2 s) and every --watch-interval, and print only what changed, with the time (-o json: one document a line); Ctrl-C ends it with the last diagnosis' exit code",
      default: false,
      helpGroup: OUTPUT,
    }),
    'watch-interval': Flags.integer({
      description:
        "with --watch: read the nodes' rules again after this many seconds without a change (they have no watch) [default: 10]",
      min: 1,
      helpGroup: OUTPUT,
    }),
    ...ignoreFlags,
    ...failOnFlag,
    ...proxyModeFlag(DIAGNOSIS),
    ...clientFlags,
    'all-rules': Flags.boolean({
      description:
        "read each node's whole iptables dump, not only the chains this Service's packets can reach (read chain by chain where the node is read as root over SSH)",
      default: false,
      helpGroup: DIAGNOSIS,
      exclusive: ['snapshot'],
    }),
    'kernel-trace': Flags.boolean({
      description:
        "confirm each probe with netfilter's own trace on nftables/iptables-nft nodes: a private nft table of the doctor's marks only the probes' packets, deleted at the end (the commands are printed first; needs root on the node)",
      default: false,
      helpGroup: DIAGNOSIS,
      exclusive: ['snapshot'],
    }),
    'dry-run': Flags.boolean({
      description: 'with --kernel-trace: print the commands it would run on each node, run none of them',
      default: false,
      helpGroup: DIAGNOSIS,
      dependsOn: ['kernel-trace'],
    }),
  }

  async run(): Promise<void> {
    const {args, flags} = await this.parse(Svc, explainValueAsFormat(this.argv))
    if (flags.quiet && flags.output !== 'table')
      throw new DiagnosisError(
        `--quiet prints only the headline of the table: it cannot be combined with -o ${flags.output}`,
      )
    if (flags['explain-format'] && !flags.explain)
      throw new DiagnosisError('--explain-format says how to show the --explain walks: add --explain')
    if (flags['explain-format'] && flags.output !== 'table')
      throw new DiagnosisError(
        `--explain-format shapes the table's walks: -o ${flags.output} has its own form (-o json --explain holds every step)`,
      )
    // Not oclif's dependsOn: it counts a boolean flag's default as given.
    if (flags['watch-interval'] !== undefined && !flags.watch)
      throw new DiagnosisError('--watch-interval says how often --watch reads the nodes again: add --watch')
    if (flags['kernel-trace'] && !flags.probe)
      throw new DiagnosisError('--kernel-trace traces the live probes: it cannot be combined with --no-probe')
    // The one flag that changes the nodes: every watch round would make its table on every node again.
    if (flags['kernel-trace'] && flags.watch)
      throw new DiagnosisError(
        "--kernel-trace makes a trace table on each node for one run's probes: it cannot be combined with --watch (each round would change the nodes again); run it once, without --watch",
      )
    const ignore = ignoreRules(flags)
    const log = verboseLog(flags)
    const failOn = parseFailOn(flags['fail-on'])
    if (typeof failOn === 'string') throw new DiagnosisError(failOn)
    if (flags.watch && flags.snapshot)
      throw new DiagnosisError('--watch watches a live cluster: a --snapshot bundle has nothing to watch')
    if (flags.watch && flags.output !== 'table' && flags.output !== 'json')
      throw new DiagnosisError(`--watch prints changes as they come: -o table or -o json, not -o ${flags.output}`)
    const diagnoseOnce = async (round?: LiveRound) => {
      // Nodes read live show a progress line in a terminal, cleared before anything else is printed.
      const progress = flags.snapshot ? undefined : progressReporter(flags)
      let g
      try {
        g = flags.snapshot
          ? await gatherSnapshot(
              flags.snapshot,
              flags.namespace ?? 'default',
              args.name,
              splitList(flags.nodes),
              parseClientFlags(flags),
            )
          : await gatherLive(args.name, liveOptions(flags, {log, onProgress: progress?.onProgress}), round)
      } finally {
        progress?.done()
      }
      for (const w of g.warnings) stderrLine(`warning: ${w}`)
      const probes = flags.snapshot ? (g.probes ?? PROBES_SNAPSHOT) : ((g as GatheredLive).probes ?? PROBES_OFF)
      const readVia = 'readVia' in g ? (g as GatheredLive).readVia : undefined
      const d = diagnose(g.cluster, g.observations, {
        ignore,
        proxyMode: flags['proxy-mode'] as ProxyMode | undefined,
        probes,
        readVia,
        log,
        reach: g.reach,
      })
      // No node read: the API-side checks still ran and are reported; every node is in notChecked (required when tried).
      if (g.observations.length > 0 && !g.observations.some((o) => o.reachable))
        stderrLine(`warning: no node could be read: ${g.observations.map((o) => `${o.name}: ${o.error}`).join('; ')}`)
      const context = flags.snapshot ? null : await currentContext(flags)
      const notes = [
        g.selectionNote,
        g.rulesNote,
        readVia && apiOnlyNote(readVia),
        policySourcesNote(g.cluster),
      ].filter((n): n is string => !!n)
      const built = buildReport(d, {
        explain: flags.explain,
        notes,
        meta: {toolVersion: this.config.version, time: new Date().toISOString(), context},
      })
      const order = readVia ? [...g.observations.map((o) => o.name), ...readVia.keys()].sort() : []
      const report = readVia ? withReadVia(built, readVia, order) : built
      return {report, readVia, order, service: g.cluster.service, gathered: g as GatheredLive}
    }
    const write = (chunk: string | Uint8Array) => process.stdout.write(chunk)
    const layout = {chalk: makeChalk(), width: outputWidth(process.stdout)}
    if (flags.watch) {
      const {loadKubeConfig} = await import('../cluster/live-source.js')
      const {watchLoop} = await import('../cli/watch-loop.js')
      const {watchTargets} = await import('../cli/watch-targets.js')
      const {watchRounds} = await import('../cli/watch-rounds.js')
      const {newBreaks} = await import('../report/watch-changes.js')
      const format = flags.output as 'table' | 'json'
      const kc = loadKubeConfig({
        kubeconfig: flags.kubeconfig,
        context: flags.context,
        timeoutMs: flags.timeout * 1000,
      }).kc
      const rounds = watchRounds(kc, {timeoutMs: flags.timeout * 1000, probes: flags.probe, log})
      const last = await watchLoop({
        kc,
        diagnose: async (round) => {
          const d = await diagnoseOnce(rounds.start(round))
          rounds.finish(d.gathered)
          return d
        },
        breaks: (prev, next) => newBreaks(prev.report, next.report),
        settleMs: WATCH_SETTLE_MS,
        targets: (first) =>
          watchTargets(first.service, {
            namespace: flags['kube-proxy-namespace'],
            selector: flags['kube-proxy-selector'],
          }),
        print: (prev, next) =>
          writeWatchReport(
            prev?.report,
            next.report,
            {
              format,
              quiet: flags.quiet,
              failOn,
              readVia: next.readVia,
              order: next.order,
              walks: flags.explain ? (flags['explain-format'] === 'tree' ? 'tree' : 'text') : undefined,
            },
            layout,
            write,
          ),
        minGapMs: WATCH_GAP_MS,
        intervalMs: (flags['watch-interval'] ?? WATCH_INTERVAL_SECONDS) * 1000,
        timeoutMs: flags.timeout * 1000,
        log,
      })
      process.exitCode = exitCode(last.report, failOn)
      return
    }
    const {report, readVia, order} = await diagnoseOnce()
    if (flags.output === 'mermaid') await writeMermaid(report, write)
    else if (flags.output === 'html')
      await writeHtml(
        [report],
        {title: `kproxy-doctor: ${report.service.namespace}/${report.service.name}`, summary: null},
        write,
      )
    else
      writeServiceReport(
        report,
        {
          format: flags.output as 'table' | 'json' | 'yaml' | 'junit',
          quiet: flags.quiet,
          failOn,
          readVia,
          order,
          walks: flags['explain-format'] === 'tree' ? 'tree' : 'text',
        },
        layout,
        write,
      )
    process.exitCode = exitCode(report, failOn)
  }
}
