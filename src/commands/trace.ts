import {Flags} from '@oclif/core'
import {DoctorCommand} from '../cli/base-command.js'
import {liveOptions, NODE_READ_ONLY_FLAGS, nodeReadFlags} from '../cli/flags.js'
import {DiagnosisError} from '../errors.js'
import {makeChalk} from '../report/human.js'
import {writeTrace} from '../report/output.js'
import {traceHeader} from '../report/document.js'
import {outputWidth} from '../report/width.js'
import {familyOf, parseIp} from '../net/address.js'
import type {Protocol, TraceResult} from '../trace/types.js'
import type {NodeObservation} from '../node/observation.js'
import {
  chooseMode,
  DUMP_FILES,
  filesExcluding,
  modeOfFiles,
  type DumpFile,
  type FileTracer,
  type GivenFiles,
} from '../model/modes/index.js'
import {TRACE_EXIT_CODES} from '../cli/exit-codes.js'

/** One flag per dump file a mode's walk reads; a file no mode reads with another is an error beside it. */
const dumpFileFlag = (file: DumpFile) =>
  Flags.string({description: DUMP_FILES[file], exclusive: [...NODE_READ_ONLY_FLAGS, ...filesExcluding(file)]})
const dumpFileFlags = Object.fromEntries(
  (Object.keys(DUMP_FILES) as DumpFile[]).map((file) => [file, dumpFileFlag(file)]),
) as Record<DumpFile, ReturnType<typeof dumpFileFlag>>

export default class Trace extends DoctorCommand {
  static override summary = "Walk one new connection through a node's rules, rule by rule, as netfilter would"
  static override description = TRACE_EXIT_CODES
  static override usage = [
    'trace --iptables-save FILE|- --src IP --dst IP --dport PORT [--ipset-save FILE] [--node-ip IP]... [--proto tcp|udp|sctp] [--sport PORT] [--in-iface IF] [--out-iface IF] [-o table|json]',
    'trace --nft FILE|- --src IP --dst IP --dport PORT [--node-ip IP]... [-o table|json]',
    'trace --node NAME --src IP --dst IP --dport PORT [--via auto|ssh|kube-proxy|debug-pod] [--context CTX] [--kubeconfig FILE] [--ssh-config FILE] [--timeout SECONDS] [-o table|json]',
  ]
  static override examples = [
    '<%= config.bin %> trace --iptables-save node-b.txt --src 10.0.3.7 --dst 10.200.0.12 --dport 30080 --node-ip 10.200.0.12',
    'ssh node-b sudo iptables-save | <%= config.bin %> trace --iptables-save - --src 10.244.1.5 --dst 10.96.10.10 --dport 80 -o json',
    '<%= config.bin %> trace --node node-b --src 10.244.1.5 --dst 10.96.10.10 --dport 80',
    'ssh node-c sudo nft list ruleset | <%= config.bin %> trace --nft - --src 10.244.1.5 --dst 10.96.10.10 --dport 80',
  ]
  static override flags = {
    ...dumpFileFlags,
    node: Flags.string({
      description:
        'read the rules live from this node, the way --via says (as svc does); its addresses from the cluster',
    }),
    src: Flags.string({required: true, description: 'source address of the packet'}),
    dst: Flags.string({required: true, description: 'destination address'}),
    dport: Flags.integer({required: true, min: 1, max: 65535, description: 'destination port'}),
    sport: Flags.integer({default: 40000, min: 1, max: 65535, description: 'source port'}),
    proto: Flags.string({default: 'tcp', options: ['tcp', 'udp', 'sctp']}),
    'node-ip': Flags.string({
      multiple: true,
      description: "the node's own addresses (repeatable): decide addrtype LOCAL and the OUTPUT path",
    }),
    'in-iface': Flags.string({description: 'interface the packet arrives on, for -i matches'}),
    'out-iface': Flags.string({description: 'interface it leaves by, for -o matches'}),
    output: Flags.string({
      char: 'o',
      options: ['table', 'json', 'yaml'],
      default: 'table',
      description: 'output format',
    }),
    ...nodeReadFlags,
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(Trace)
    for (const [name, ip] of [
      ['--src', flags.src],
      ['--dst', flags.dst],
      ...(flags['node-ip'] ?? []).map((x) => ['--node-ip', x]),
    ]) {
      if (!parseIp(ip)) throw new DiagnosisError(`${name} ${ip} is not an IP address`)
    }
    if (familyOf(flags.src) !== familyOf(flags.dst))
      throw new DiagnosisError(`--src ${flags.src} and --dst ${flags.dst} are of different address families`)
    let localAddresses = flags['node-ip'] ?? []
    let walk: FileTracer
    if (flags.node) {
      // Loaded only here: reading a node live pulls in the cluster and node access a file trace never uses.
      const {readNodeLive} = await import('../diagnosis/gather.js')
      const live = await readNodeLive(flags.node, liveOptions(flags))
      for (const w of live.warnings) process.stderr.write(`kproxy-doctor: warning: ${w}\n`)
      localAddresses = [...localAddresses, ...live.addresses]
      walk = nodeWalk(live.obs, localAddresses, flags.dst.includes(':') ? 'ip6' : 'ip')
    } else {
      const given: GivenFiles = Object.fromEntries(
        (Object.keys(DUMP_FILES) as DumpFile[]).filter((f) => flags[f] !== undefined).map((f) => [f, flags[f]]),
      )
      const picked = modeOfFiles(given)
      if ('error' in picked) throw new DiagnosisError(picked.error)
      walk = picked.mode.fromFiles.build(given, {localAddresses, dst: flags.dst})
    }
    try {
      const packet = {
        src: flags.src,
        dst: flags.dst,
        dport: flags.dport,
        sport: flags.sport,
        proto: flags.proto as Protocol,
        inIface: flags['in-iface'],
        outIface: flags['out-iface'],
      }
      let result: TraceResult
      try {
        result = walk.tracer.trace(packet)
      } catch (e) {
        // Rules are parsed when the walk reaches them: a broken one surfaces here.
        throw walk.walkError(e)
      }
      result = walk.inputLines(result)
      writeTrace(
        {
          ...traceHeader({toolVersion: this.config.version, time: new Date().toISOString()}),
          ...result,
          notes: walk.notes,
        },
        {format: flags.output as 'table' | 'json' | 'yaml'},
        {chalk: makeChalk(), width: outputWidth(process.stdout)},
        (chunk) => process.stdout.write(chunk),
      )
      process.exitCode = 0
    } finally {
      walk.close()
    }
  }
}

/** For --node: walk the rules of the mode the node runs, decided as `svc` decides it (without the cluster's configuration). */
function nodeWalk(obs: NodeObservation, localAddresses: string[], family: 'ip' | 'ip6'): FileTracer {
  const choice = chooseMode(obs, {family, nodeAddress: localAddresses[0]}, undefined)
  if (!choice) throw new DiagnosisError(`${obs.name}: the rules of its kube-proxy mode could not be read`)
  return {
    tracer: choice.dataplane.tracer(localAddresses),
    notes: [],
    inputLines: (result) => result,
    walkError: (e) => e,
    close: () => undefined,
  }
}
