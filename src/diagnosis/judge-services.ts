import type {V1Service} from '@kubernetes/client-node'
import type {ClusterState} from '../cluster/types.js'
import {notProxiedReason} from '../model/expected.js'
import {forgetOneOffChains, shareChainParses, type NodeObservation} from '../node/observation.js'
import {diagnose, type DiagnoseOptions, type Diagnosis} from './diagnose.js'

/** One Service a scan judges: its API objects, or why they could not be read. */
export interface ServiceState {
  service: V1Service
  state?: ClusterState
  unreadable?: string
}

export interface ServiceOutcome<R> {
  namespace: string
  name: string
  type: string
  /** Why the Service was not diagnosed: it gets no kube-proxy rules by design, or its API objects could not be read. */
  skipped?: string
  /** What the caller keeps of the Service's diagnosis (see Summarise). */
  diagnosis?: R
}

/**
 * What a scan keeps of each Service's diagnosis, made as soon as it is judged: a scan of thousands of Services must
 * not hold every trace and node view until the end.
 */
export type Summarise<R> = (d: Diagnosis) => R

/**
 * Judges one Service of a scan on the nodes' shared observations, then drops the parsed chains only it asked for.
 * The same on the scan's own thread and on its worker threads.
 */
export function judgeService<R>(
  {service, state, unreadable}: ServiceState,
  observations: NodeObservation[],
  opts: DiagnoseOptions,
  summarise: Summarise<R>,
): ServiceOutcome<R> {
  const base = {
    namespace: service.metadata?.namespace ?? '',
    name: service.metadata?.name ?? '',
    type: service.spec?.type ?? 'ClusterIP',
  }
  if (unreadable) return {...base, skipped: `not diagnosed: ${unreadable}`}
  const reason = notProxiedReason(service)
  if (reason) return {...base, skipped: reason}
  if (!state) return {...base, skipped: `not diagnosed: ${unreadable ?? 'unreadable'}`}
  shareChainParses(observations)
  try {
    return {...base, diagnosis: summarise(diagnose(state, observations, opts))}
  } catch (e) {
    // One Service that cannot be judged (an object of a shape no check expects) never ends the scan of the others.
    return {...base, skipped: `not judged: ${(e as Error).message}`}
  } finally {
    forgetOneOffChains(observations)
  }
}
