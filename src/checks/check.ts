import type {ClusterState} from '../cluster/types.js'
import type {CodeEntry} from './catalogue.js'
import type {NodeObservation} from '../node/observation.js'
import type {ExpectedService} from '../model/expected.js'
import type {Dataplane, NodeInfrastructure, ProgrammedPort} from '../model/dataplane.js'
import type {ModeChoice} from '../model/modes/index.js'
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
  /** The command to paste, exactly as printed (`fix:`), or null; its argv stages in `argv`. */
  command: string | null
  argv: Command | null
  /** Prose: what to do or look at, on its own line; null when the command says it all. */
  text: string | null
  evidence: string[]
}

export interface FindingDraft {
  node: string | null
  message: string
  /** A command built with the context's `reach` (never a formatted string); undefined when it cannot be built. */
  command?: Command
  /** Prose, never a command to paste; defaults to the catalogue's text when there is no command either. */
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
    command: d.command ? renderCommand(d.command) : null,
    argv: d.command ?? null,
    text: d.text ?? (d.command ? null : meta.hint),
    evidence: d.evidence ?? [],
  }
}
