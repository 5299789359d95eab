import type {NodeObservation} from '../../node/observation.js'
import type {Dataplane} from '../dataplane.js'
import {iptablesMode} from './iptables.js'
import {ipvsMode} from './ipvs.js'
import type {NodeFacts, ProxyMode, ProxyModeAdapter} from './mode.js'
import {nftablesMode} from './nftables.js'

export type {NodeFacts, ProxyMode, TableFamily} from './mode.js'

/** Every mode the doctor judges, in the order their rules are recognised (IPVS's glue looks like iptables rules). */
const PROXY_MODES: readonly ProxyModeAdapter[] = [ipvsMode, nftablesMode, iptablesMode]

function isProxyMode(name: string): name is ProxyMode {
  return PROXY_MODES.some((m) => m.mode === name)
}

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
}

const adapter = (mode: ProxyMode) => PROXY_MODES.find((m) => m.mode === mode)!

/**
 * Which mode a node runs, in this order: --proxy-mode; kube-proxy's own /proxyMode; the rules on the node (IPVS's glue
 * first, then the one mode whose rules are there); kube-proxy's configuration; iptables, kube-proxy's default.
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
    unreadable: !adapter(mode).readable(obs, facts),
  })
  if (override) return decided(override, '--proxy-mode')
  const reported = obs.kubeProxy?.proxyMode
  if (reported && isProxyMode(reported)) return decided(reported, "kube-proxy's /proxyMode on the node")
  const glue = ipvsMode.recognise(obs, facts)
  if (glue) return decided('ipvs', glue)
  if (configured?.mode === 'ipvs' && !PROXY_MODES.some((m) => m.recognise(obs, facts)))
    return decided('ipvs', configured.source)
  const present = PROXY_MODES.filter((m) => m.recognise(obs, facts))
  if (present.length === 1) return decided(present[0].mode, present[0].recognise(obs, facts)!)
  if (configured && isProxyMode(configured.mode || 'iptables'))
    return decided((configured.mode || 'iptables') as ProxyMode, configured.source)
  return decided('iptables', 'default (iptables)')
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
  const read = [obs.iptables, obs.ip6tables, obs.nft, obs.ipvs, obs.kubeProxy?.proxyMode]
  const byQuestion = choices.get(obs) ?? new Map<string, RememberedChoice>()
  choices.set(obs, byQuestion)
  const seen = byQuestion.get(key)
  if (seen && seen.read.every((r, i) => r === read[i])) return seen.choice
  const d = decideMode(obs, facts, configured, override)
  const leftovers = d.unreadable
    ? []
    : PROXY_MODES.filter((m) => m.mode !== d.mode).flatMap((m) => m.leftovers(obs, facts, d.mode) ?? [])
  const choice = d.unreadable
    ? undefined
    : {mode: d.mode, source: d.source, dataplane: adapter(d.mode).dataplane(obs, facts), leftovers}
  byQuestion.set(key, {read, choice})
  return choice
}

/** A node's mode choice, with what it was made from (a node read again is decided again). */
interface RememberedChoice {
  read: unknown[]
  choice: ModeChoice | undefined
}
const choices = new WeakMap<NodeObservation, Map<string, RememberedChoice>>()
