import type {NodeObservation} from '../../node/observation.js'
import type {TraceResult, Tracer} from '../../trace/types.js'
import type {Dataplane, ModeVocabulary} from '../dataplane.js'
import type {NodeRead} from '../reach.js'
import type {DumpFile, GivenFiles} from './dump-files.js'

/** The address family being judged: nftables keeps one kube-proxy table per family, iptables one dump per family. */
export type TableFamily = 'ip' | 'ip6'

export interface NodeFacts {
  family: TableFamily
  /** The node's own address (NodePorts, IPVS node virtual servers). */
  nodeAddress?: string
}

/** What on a node says this mode runs there, in the report's words. */
interface Recognition {
  reason: string
  /**
   * The evidence settles the mode even where another mode's rules are there too (IPVS's glue: its iptables rules also
   * look like iptables mode's). Otherwise the mode is decided by its rules only when no other mode's rules are there.
   */
  conclusive?: boolean
}

/** Why a node's rules of one family were not judged in the mode it runs (its `readable` said no). */
interface ModeNotRead {
  /** The report's "not checked" reason: "IPv6 rules not read (ip6tables-save)". */
  reason: string
  /**
   * Part of the mode's state was read and could be mistaken for all of it (IPVS's iptables glue without its virtual
   * servers): a finding (KPD-MODE-UNSUPPORTED) says so, with `source` saying what decided the mode and what is
   * missing, and `look(address)` what a person runs on the node to look at the Service's address by hand.
   */
  finding?: {source: string; look(address: string): NodeRead}
}

/** A walk `trace` built from dump files: the tracer, and how its results and errors name the input. */
export interface FileTracer {
  tracer: Tracer
  /** What the normaliser assumed of a pasted input (printed before the walk). */
  notes: string[]
  /** The walk with its steps naming the lines of the input (not of a normalised paste). */
  inputLines(result: TraceResult): TraceResult
  /** An error of the walk (a rule parsed when reached) as the user should read it: naming the file and its line. */
  walkError(e: unknown): unknown
  close(): void
}

/**
 * How `trace` walks this mode from files, without a node: the file that picks this mode, the files it cannot walk
 * without (and why), the files it reads when given; and the walk built from them. Flags, their exclusions and the
 * choice of mode follow from these (commands/trace.ts).
 */
interface TracerFromFiles {
  picks: DumpFile
  needs?: Array<{file: DumpFile; why: string}>
  takes?: DumpFile[]
  build(files: GivenFiles, at: {localAddresses: string[]; dst: string}): FileTracer
}

/**
 * One way Services are implemented on a node (a kube-proxy mode): how it is recognised, whether what was read is
 * enough to judge it (and why not), the dataplane (desired-vs-programmed reading, tracer, vocabulary: the names of its
 * chains, maps or sets for each step of the path) it judges with, its leftovers on a node running another mode, and how
 * `trace` walks it from files. Nothing here assumes a kind of rules:
 * each adapter reads the observation its own way. Adding a mode is one adapter and one entry in the registry.
 */
export interface ProxyModeAdapter<M extends string = string> {
  /** The mode's name: --proxy-mode, kube-proxy's /proxyMode and its configuration's `mode`. */
  mode: M
  /** Evidence on the node that kube-proxy runs this mode; undefined when there is none. */
  recognise(obs: NodeObservation, facts: NodeFacts): Recognition | undefined
  /** What was read is enough to build this mode's dataplane for the family of `facts`. */
  readable(obs: NodeObservation, facts: NodeFacts): boolean
  /**
   * Why this mode's rules could not be read where the read was made and failed (nft not on the host), in the read's
   * words; undefined when they were read or not asked for. Another mode's rules alone then do not settle the mode.
   */
  readFailed?(obs: NodeObservation): string | undefined
  /** When `readable` is not: why, in the report's words; `source` is what decided the mode. */
  notRead(facts: NodeFacts, source: string, obs: NodeObservation): ModeNotRead
  dataplane(obs: NodeObservation, facts: NodeFacts): Dataplane
  /** The words of its dataplane: its own names for each step of the path (the same object its dataplanes carry). */
  vocabulary: ModeVocabulary
  /** This mode's rules left behind on a node that runs `running`, described; undefined when there are none. */
  leftovers(obs: NodeObservation, facts: NodeFacts, running: string): string | undefined
  fromFiles: TracerFromFiles
}

/** "IPv4" or "IPv6", as the report names a family. */
export const familyLabel = (facts: NodeFacts) => (facts.family === 'ip6' ? 'IPv6' : 'IPv4')
