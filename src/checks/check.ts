import type {ClusterState} from '../cluster/types.js'
import type {CodeEntry} from './catalogue.js'
import type {NodeObservation} from '../node/observation.js'
import type {ExpectedService} from '../model/expected.js'
import type {Dataplane, NodeInfrastructure, ProgrammedPort} from '../model/dataplane.js'
import type {ModeChoice} from '../model/modes/index.js'
import type {NodeImplementer} from '../model/implementers/index.js'
import type {CiliumNodeView} from '../model/cilium-services.js'
import type {ArrivalWalk, EndpointHalf, PathResult} from '../model/paths.js'
import type {NodeRead, Reach} from '../model/reach.js'
import type {ProbeRun} from '../node/probe/tcp-probe.js'
import {renderCommand, type Command} from '../model/shell.js'

type Severity = CodeEntry['severity']

export interface Finding {
  code: string
  severity: Severity
  title: string
  node: string | null
  message: string
  /** A read-only command that shows the evidence (`check:`), or null. */
  check: CheckStep | null
  /** What repairs it, where the repair is known (`fix (changes NODE):`), or null; it changes the node or the cluster. */
  fix: FixStep | null
  /** Prose: what to do or look at, on its own line; null when the commands say it all. */
  text: string | null
  evidence: string[]
}

/** A command exactly as printed (`command`, every word quoted) and its argv stages (`argv`). */
interface CheckStep {
  command: string
  argv: Command
}

/**
 * A repair: a command that changes something (and/or prose when it is a setting to change by hand), and what it
 * changes: a node (`node` names it) or the cluster (`node` null).
 */
export interface FixStep {
  command: string | null
  argv: Command | null
  text: string | null
  changes: 'node' | 'cluster'
  node: string | null
}

/** A repair as a rule gives it: a command built with the context's `reach`, and/or prose; what it changes. */
export type FixDraft = {command?: Command; text?: string} & (
  | {changes: 'cluster'}
  /** `node` defaults to the finding's node. */
  | {changes: 'node'; node?: string}
)

export interface FindingDraft {
  node: string | null
  message: string
  /**
   * A read-only command that shows the evidence, built with the context's `reach` (never a formatted string);
   * undefined when it cannot be built.
   */
  check?: Command
  /** What repairs it, when the repair is known; dropped when it has neither a command nor prose. */
  fix?: FixDraft
  /** Prose, never a command to paste; defaults to the catalogue's text when there is neither a check nor a fix. */
  text?: string
  evidence?: string[]
}

/** A node whose dataplane was read, with what kube-proxy should have programmed there and what it did. */
export interface NodeView {
  name: string
  address?: string
  obs: NodeObservation
  /** The proxy mode read on this node, and what decided it. */
  mode: ModeChoice
  dataplane: Dataplane
  expected: ExpectedService
  programmed: ProgrammedPort[]
  infra: NodeInfrastructure
}

export interface CheckContext {
  cluster: ClusterState
  /** The Service as seen cluster-wide (node-independent facts). */
  service: ExpectedService
  nodes: NodeView[]
  observations: NodeObservation[]
  paths: PathResult[]
  /** The second half of each path that DNATs to an endpoint on another read node, walked there (followEndpoints). */
  halves: EndpointHalf[]
  /**
   * Each read node's DNS question (from its own address, over TCP) walked to the ready cluster DNS endpoints on the other
   * read nodes, as those nodes receive it; empty when the DNS Service is the one diagnosed (its own halves say it) or
   * judged apart (a scan).
   */
  dnsArrivals: ArrivalWalk[]
  /** Findings of the checks that ran before this one (checks run in CHECKS order). */
  findings: Finding[]
  /** How the user reaches the cluster and each node: rules build their commands with it (model/reach.ts). */
  reach: Reach
  /**
   * Readable nodes whose proxy mode was decided while part of its state was not read, in a way that could pass for all
   * of it (ModeNotRead.finding): their rules are not judged, and KPD-MODE-UNSUPPORTED says so.
   */
  modeNotRead: Array<{node: string; mode: string; source: string; look(address: string): NodeRead}>
  /** The live probe stage's results, or why there were none (see checks/rules/probe-evidence.ts). */
  probes: ProbeRun
  /**
   * The cluster DNS Service is judged as a Service of its own in this run (a scan): the other Services leave the faults
   * of its path (its conntrack entries) to its own diagnosis, so one fault gives one finding.
   */
  dnsJudgedApart: boolean
  /**
   * Who implements Services on each node (read or not): kube-proxy's checks see only the nodes where its rules are
   * judged (`nodes`); these say who serves the others.
   */
  implementers: NodeImplementer[]
  /** The nodes whose Services Cilium implements and whose agent's Service list was read, compared with the slices. */
  cilium: CiliumNodeView[]
}

export interface Check {
  meta: CodeEntry
  run(ctx: CheckContext): FindingDraft[]
}

export function toFinding(meta: CodeEntry, d: FindingDraft): Finding {
  return {
    code: meta.code,
    severity: meta.severity,
    title: meta.title,
    node: d.node,
    message: d.message,
    check: d.check ? {command: renderCommand(d.check), argv: d.check} : null,
    fix: fixStep(d),
    text: d.text ?? (d.check || d.fix?.command || d.fix?.text ? null : meta.hint),
    evidence: d.evidence ?? [],
  }
}

function fixStep(d: FindingDraft): FixStep | null {
  const fix = d.fix
  if (!fix || (!fix.command && !fix.text)) return null
  return {
    command: fix.command ? renderCommand(fix.command) : null,
    argv: fix.command ?? null,
    text: fix.text ?? null,
    changes: fix.changes,
    node: fix.changes === 'node' ? (fix.node ?? d.node) : null,
  }
}
