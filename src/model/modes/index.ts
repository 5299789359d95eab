import type {NodeObservation} from '../../node/observation.js'
import type {Dataplane} from '../dataplane.js'
import {DUMP_FILES, type DumpFile, type GivenFiles} from './dump-files.js'
import {iptablesMode} from './iptables.js'
import {ipvsMode} from './ipvs.js'
import {familyLabel, type NodeFacts, type ProxyModeAdapter} from './mode.js'
import {nftablesMode} from './nftables.js'

export type {FileTracer, NodeFacts, ProxyModeAdapter, TableFamily} from './mode.js'
export {DUMP_FILES, type DumpFile, type GivenFiles}

/**
 * Every kube-proxy mode the doctor judges: one adapter each (mode.ts says what an adapter owns). `--proxy-mode`'s
 * options, the mode type and the catalogue's "all modes" follow from this list, in this order.
 */
export const PROXY_MODES = [iptablesMode, nftablesMode, ipvsMode] as const

export type ProxyMode = (typeof PROXY_MODES)[number]['mode']

/** Every mode's name, in the registry's order. */
export const PROXY_MODE_NAMES: readonly ProxyMode[] = PROXY_MODES.map((m) => m.mode)

/** kube-proxy's default mode: where nothing on the node or in its configuration says otherwise. */
const DEFAULT_MODE: ProxyMode = 'iptables'

function isProxyMode(name: string): name is ProxyMode {
  return PROXY_MODES.some((m) => m.mode === name)
}

/** The adapter of a mode. */
export const proxyMode = (mode: ProxyMode): ProxyModeAdapter => PROXY_MODES.find((m) => m.mode === mode)!

export interface ModeChoice {
  mode: ProxyMode
  /** What decided it, for the report. */
  source: string
  dataplane: Dataplane
  /** Rules of the other modes found on the node too, described. */
  leftovers: string[]
}

export interface ModeDecision {
  mode: ProxyMode
  source: string
  /** The decided mode could not be judged: what it needs was not read. */
  unreadable: boolean
  /**
   * The mode is not known (then `unreadable` too, and `mode` only the guess): it would be inferred while another
   * mode's rules could not be read, so what was read may be leftovers. Why, in the report's words.
   */
  unknown?: string
  /** Where the mode is not known: the same in short, for what only points at the node (an endpoint's half on it). */
  unknownInShort?: string
}

/**
 * Which mode a node runs, in this order: --proxy-mode; kube-proxy's own /proxyMode; the rules on the node (evidence
 * that settles it, else the one mode whose rules are there); kube-proxy's configuration; kube-proxy's default.
 * Where another mode's rules could not be read (ProxyModeAdapter.readFailed), a lone mode's rules and the default
 * decide nothing: the configuration naming a mode still does; else the mode is not known.
 */
export function decideMode(
  obs: NodeObservation,
  facts: NodeFacts,
  configured: {mode: string; source: string} | undefined,
  override?: ProxyMode,
): ModeDecision {
  const decided = (mode: ProxyMode, source: string): ModeDecision => ({
    mode,
    source,
    unreadable: !proxyMode(mode).readable(obs, facts),
  })
  if (override) return decided(override, '--proxy-mode')
  const reported = obs.kubeProxy?.proxyMode
  if (reported && isProxyMode(reported)) return decided(reported, "kube-proxy's /proxyMode on the node")
  const present = PROXY_MODES.flatMap((m) => {
    const r = m.recognise(obs, facts)
    return r ? [{mode: m.mode, ...r}] : []
  })
  const settled = present.find((p) => p.conclusive) ?? (present.length === 1 ? present[0] : undefined)
  const guess = settled?.mode ?? DEFAULT_MODE
  const unread = settled?.conclusive ? [] : PROXY_MODES.filter((m) => m.mode !== guess && m.readFailed?.(obs))
  if (unread.length === 0) {
    if (settled) return decided(settled.mode, settled.reason)
    const wanted = configured?.mode || DEFAULT_MODE
    if (configured && isProxyMode(wanted)) return decided(wanted, configured.source)
    return decided(DEFAULT_MODE, `default (${DEFAULT_MODE})`)
  }
  if (configured && isProxyMode(configured.mode)) return decided(configured.mode, configured.source)
  const asked = obs.kubeProxy?.proxyModeError
  const why = [
    ...(asked ? [`kube-proxy's /proxyMode did not answer: ${asked}`] : []),
    ...unread.map((m) => `${m.mode} mode's rules were not read: ${m.readFailed!(obs)}`),
  ]
  const found = settled
    ? `${settled.mode} mode's rules on the node may be leftovers of a mode no longer run`
    : 'no kube-proxy rules were found in what was read'
  const notKnown = `${familyLabel(facts)} rules not judged: the proxy mode is not known`
  return {
    mode: guess,
    source: 'not known',
    unreadable: true,
    unknown: `${notKnown} (${why.join('; ')}): ${found} (--proxy-mode says which mode runs)`,
    unknownInShort: `${notKnown} (Not checked says why; --proxy-mode says which mode runs)`,
  }
}

/** The mode a node runs and its dataplane; undefined when that mode's data was not read (see decideMode). */
export function chooseMode(
  obs: NodeObservation,
  facts: NodeFacts,
  configured: {mode: string; source: string} | undefined,
  override?: ProxyMode,
): ModeChoice | undefined {
  // A scan asks this of every node for every Service: decided (and the dataplane built) once per node and question.
  const key = JSON.stringify([
    facts.family,
    facts.nodeAddress ?? null,
    configured?.mode ?? null,
    configured?.source ?? null,
    override ?? null,
  ])
  // What was read, as it stands: a node whose reads were replaced is decided again.
  const read = [...Object.values(obs), obs.kubeProxy?.proxyMode]
  const byQuestion = choices.get(obs) ?? new Map<string, RememberedChoice>()
  choices.set(obs, byQuestion)
  const seen = byQuestion.get(key)
  if (seen && seen.read.length === read.length && seen.read.every((r, i) => r === read[i])) return seen.choice
  const d = decideMode(obs, facts, configured, override)
  const leftovers = d.unreadable
    ? []
    : PROXY_MODES.filter((m) => m.mode !== d.mode).flatMap((m) => m.leftovers(obs, facts, d.mode) ?? [])
  const choice = d.unreadable
    ? undefined
    : {mode: d.mode, source: d.source, dataplane: proxyMode(d.mode).dataplane(obs, facts), leftovers}
  byQuestion.set(key, {read, choice})
  return choice
}

/** A node's mode choice, with what it was made from (a node read again is decided again). */
interface RememberedChoice {
  read: unknown[]
  choice: ModeChoice | undefined
}
const choices = new WeakMap<NodeObservation, Map<string, RememberedChoice>>()

/**
 * The mode `trace` walks from the files given: of the modes whose picking file is there, the one that reads the most
 * of them (an IPVS node's ipvsadm output and its iptables glue: IPVS, not iptables; an nftables ruleset and the
 * node's iptables-save: nftables, walking both). A mode missing a file it cannot
 * walk without, or no file at all: a message for the user.
 */
export function modeOfFiles(given: GivenFiles): {mode: ProxyModeAdapter} | {error: string} {
  const has = (f: DumpFile) => given[f] !== undefined
  const picked = PROXY_MODES.filter((m) => has(m.fromFiles.picks))
  const complete = picked.filter((m) => (m.fromFiles.needs ?? []).every((n) => has(n.file)))
  // The given files each mode reads (nftables' ruleset with the node's iptables-nft save: nftables, not iptables).
  const reads = (m: ProxyModeAdapter) => filesOf(m).filter(has).length
  const best = complete.sort((a, b) => reads(b) - reads(a))[0]
  if (best) return {mode: best}
  const lacking = picked.flatMap((m) => (m.fromFiles.needs ?? []).filter((n) => !has(n.file)).map((n) => ({m, n})))[0]
  if (lacking) return {error: `--${lacking.m.fromFiles.picks} needs --${lacking.n.file} too: ${lacking.n.why}`}
  const alone = PROXY_MODES.filter((m) => !m.fromFiles.needs?.length).map((m) => `--${m.fromFiles.picks} FILE`)
  return {error: `give ${alone.join(', ')} (or - for stdin) or --node NAME`}
}

/** The dump files a mode's walk reads (picks, needs, takes). */
function filesOf(m: ProxyModeAdapter): DumpFile[] {
  return [m.fromFiles.picks, ...(m.fromFiles.needs ?? []).map((n) => n.file), ...(m.fromFiles.takes ?? [])]
}

/** The dump files no mode reads together with `file`: given with it, they are an error (trace's flag exclusions). */
export function filesExcluding(file: DumpFile): DumpFile[] {
  return (Object.keys(DUMP_FILES) as DumpFile[]).filter(
    (other) => other !== file && !PROXY_MODES.some((m) => filesOf(m).includes(file) && filesOf(m).includes(other)),
  )
}
