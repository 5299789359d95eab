import type {NodeObservation} from '../../node/bundle.js'
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
export function decideMode(obs: NodeObservation, facts: NodeFacts, configured: {mode: string; source: string} | undefined, override?: ProxyMode): ModeDecision {
  const decided = (mode: ProxyMode, source: string): ModeDecision => ({mode, source, unreadable: !adapter(mode).readable(obs, facts)})
  if (override) return decided(override, '--proxy-mode')
  const reported = obs.kubeProxy?.proxyMode
  if (reported && isProxyMode(reported)) return decided(reported, "kube-proxy's /proxyMode on the node")
  const glue = ipvsMode.recognise(obs, facts)
  if (glue) return decided('ipvs', glue)
  if (configured?.mode === 'ipvs' && !PROXY_MODES.some((m) => m.recognise(obs, facts))) return decided('ipvs', configured.source)
  const present = PROXY_MODES.filter((m) => m.recognise(obs, facts))
  if (present.length === 1) return decided(present[0].mode, present[0].recognise(obs, facts)!)
  if (configured && isProxyMode(configured.mode || 'iptables')) return decided((configured.mode || 'iptables') as ProxyMode, configured.source)
  return decided('iptables', 'default (iptables)')
}

/** The mode a node runs and its dataplane; undefined when that mode's data was not read (see decideMode). */
export function chooseMode(obs: NodeObservation, facts: NodeFacts, configured: {mode: string; source: string} | undefined, override?: ProxyMode): ModeChoice | undefined {
  const d = decideMode(obs, facts, configured, override)
  if (d.unreadable) return undefined
  const leftovers = PROXY_MODES.filter((m) => m.mode !== d.mode).flatMap((m) => m.leftovers(obs, facts, d.mode) ?? [])
  return {mode: d.mode, source: d.source, dataplane: adapter(d.mode).dataplane(obs, facts), leftovers}
}
