import {Flags} from '@oclif/core'
import {DoctorCommand} from '../cli/base-command.js'
import {liveOptions, nodeReadFlags} from '../cli/flags.js'
import {stderrLine} from '../cli/stderr.js'
import {CLEANUP_EXIT_CODES} from '../cli/exit-codes.js'
import {DiagnosisError} from '../errors.js'
import {cleanupDocument} from '../report/document.js'
import {writeCleanup} from '../report/output.js'

export default class Cleanup extends DoctorCommand {
  static override summary =
    "Delete what `svc --kernel-trace` leaves on a node when it is killed: the doctor's own nftables tables (kpd_trace_*), nothing else"
  static override description = CLEANUP_EXIT_CODES
  static override usage = [
    'cleanup --node NAME [-o table|json|yaml] [--via auto|ssh|kube-proxy|debug-pod] [--context CTX] [--kubeconfig FILE] [--ssh-config FILE] [--timeout SECONDS]',
  ]
  static override examples = ['<%= config.bin %> cleanup --node node-b']
  static override flags = {
    node: Flags.string({description: 'the node to clean up, reached the way svc reaches it', required: true}),
    ...nodeReadFlags,
    output: Flags.string({
      char: 'o',
      options: ['table', 'json', 'yaml'],
      default: 'table',
      description: 'output format: the tables deleted and not, as a CleanupReport document for json and yaml',
    }),
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(Cleanup)
    const {cleanupNodeLive} = await import('../diagnosis/cleanup-node.js')
    const r = await cleanupNodeLive(flags.node, liveOptions(flags))
    for (const f of r.failed) stderrLine(`warning: ${r.node}: not deleted: ${f}`)
    writeCleanup(
      cleanupDocument(r, {toolVersion: this.config.version, time: new Date().toISOString()}),
      {format: flags.output as 'table' | 'json' | 'yaml'},
      (chunk) => process.stdout.write(chunk),
    )
    if (r.failed.length > 0) throw new DiagnosisError(`${r.node}: ${r.failed.length} table(s) not deleted`)
  }
}
