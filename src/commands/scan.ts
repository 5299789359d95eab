import v8 from 'node:v8'
import {Flags} from '@oclif/core'
import {DoctorCommand} from '../cli/base-command.js'
import {stderrLine} from '../cli/stderr.js'
import {ignoreFlags, ignoreRules} from '../cli/ignore-config.js'
import {clusterFlags, failOnFlag, liveOptions, proxyModeFlag, splitList, verboseLog} from '../cli/flags.js'
import {progressReporter} from '../cli/progress.js'
import {currentContext} from '../cli/kube-context.js'
import {scanLive, scanSnapshot, type ScanTarget} from '../diagnosis/scan.js'
import type {ProxyMode} from '../model/modes/index.js'
import {makeChalk} from '../report/human.js'
import {outputWidth} from '../report/width.js'
import {writeHtml, writeScanReport} from '../report/output.js'
import {parseFailOn} from '../report/report.js'
import {buildScanReport, keepScannedServices, scanDocument, scanExitCode} from '../report/scan-report.js'
import {DiagnosisError} from '../errors.js'
import {DIAGNOSIS_EXIT_CODES} from '../cli/exit-codes.js'

export default class Scan extends DoctorCommand {
  static override summary =
    'Diagnose every Service of a namespace (or the cluster) in one run, each node read once: for CI smoke checks'
  static override description = DIAGNOSIS_EXIT_CODES
  static override examples = [
    '<%= config.bin %> scan -n shop',
    '<%= config.bin %> scan -A -o junit > kproxy-doctor.xml',
    '<%= config.bin %> scan -n shop -l tier=frontend --fail-on warning',
    '<%= config.bin %> scan -A --fail-on error -o junit   # nodes it cannot read do not fail the run (no exit 3)',
    '<%= config.bin %> scan -n shop --snapshot ./web-bundle   # a bundle `collect svc` wrote',
  ]
  static override flags = {
    ...clusterFlags,
    'all-namespaces': Flags.boolean({
      char: 'A',
      description: 'every namespace',
      default: false,
      exclusive: ['namespace'],
    }),
    selector: Flags.string({char: 'l', description: 'only Services with these labels (kubectl label selector syntax)'}),
    services: Flags.string({description: 'only these Services (comma-separated names)'}),
    output: Flags.string({
      char: 'o',
      options: ['table', 'json', 'yaml', 'junit', 'html'],
      default: 'table',
      description: "output format (html: one self-contained page with each Service's packet paths drawn)",
    }),
    quiet: Flags.boolean({
      char: 'q',
      description: 'print only the verdict line (the exit code tells the rest)',
      default: false,
    }),
    ...failOnFlag,
    snapshot: Flags.string({description: 'scan a recorded bundle instead of a live cluster'}),
    ...ignoreFlags,
    ...proxyModeFlag(),
    threads: Flags.integer({
      min: 1,
      max: 64,
      description:
        'threads to judge the Services on [default: one per usable CPU (cores, cgroup quota), up to 4, from 1000 Services; at most one per usable CPU, or 4 where there are fewer]',
    }),
  }

  async run(): Promise<void> {
    // A scan diagnoses Services one after another, each making objects that live until the Service is judged. V8
    // learns from the first Services (and the shared parse) that objects of those allocation sites survive, and from
    // then on makes them in the old generation, where only full collections free them: a 10,000-Service scan spent a
    // third of its time collecting. Without that pretenuring they die young, as they should.
    v8.setFlagsFromString('--no-allocation-site-pretenuring')
    const {flags} = await this.parse(Scan)
    const failOn = parseFailOn(flags['fail-on'])
    if (typeof failOn === 'string') throw new DiagnosisError(failOn)
    if (flags.quiet && flags.output !== 'table')
      throw new DiagnosisError(
        `--quiet prints only the verdict line of the table: it cannot be combined with -o ${flags.output}`,
      )
    const ignore = ignoreRules(flags)
    const log = verboseLog(flags)
    const diagnoseOptions = {
      ignore,
      proxyMode: flags['proxy-mode'] as ProxyMode | undefined,
      log,
      threads: flags.threads,
    }
    const namespace = flags['all-namespaces']
      ? undefined
      : (flags.namespace ?? (flags.snapshot ? 'default' : undefined))
    const target: ScanTarget = {namespace, selector: flags.selector, services: splitList(flags.services)}
    // The progress line (a terminal only) is cleared before anything else is printed, an error line included.
    const progress = progressReporter(flags)
    const onProgress = progress?.onProgress
    const context = flags.snapshot ? null : await currentContext(flags)
    const meta = {toolVersion: this.config.version, time: new Date().toISOString(), context}
    const keep = keepScannedServices(['json', 'yaml', 'html'].includes(flags.output), {
      meta,
    })
    let result
    try {
      if (flags.snapshot)
        result = await scanSnapshot(flags.snapshot, target, keep, {
          ...diagnoseOptions,
          nodes: splitList(flags.nodes),
          onProgress,
        })
      else {
        const live = liveOptions(flags, {log, onProgress})
        const {loadKubeConfig} = await import('../cluster/live-source.js')
        if (!flags['all-namespaces'] && !flags.namespace) target.namespace = loadKubeConfig(live.cluster).namespace
        result = await scanLive(live, target, diagnoseOptions, keep)
      }
    } finally {
      progress?.done()
    }
    for (const w of result.warnings) stderrLine(`warning: ${w}`)
    // Nodes left API-only (--via none, no way in) have no observation: only nodes that were tried and failed warn here.
    if (result.observations.length > 0 && !result.observations.some((o) => o.reachable))
      stderrLine(
        `warning: no node could be read: ${result.observations.map((o) => `${o.name}: ${o.error}`).join('; ')}`,
      )
    const scope = target.namespace === undefined ? 'all namespaces' : `namespace ${target.namespace}`
    const report = buildScanReport(result, scope, failOn, meta)
    const write = (chunk: string | Uint8Array) => process.stdout.write(chunk)
    if (flags.output === 'html')
      await writeHtml(
        scanDocument(report).services,
        {title: `kproxy-doctor scan: ${scope}`, summary: report.summary},
        write,
      )
    else
      writeScanReport(
        report,
        {format: flags.output as 'table' | 'json' | 'yaml' | 'junit', quiet: flags.quiet, failOn},
        {chalk: makeChalk(), width: outputWidth(process.stdout)},
        write,
      )
    process.exitCode = scanExitCode(report, failOn)
  }
}
