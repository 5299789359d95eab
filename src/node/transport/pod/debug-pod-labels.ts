/**
 * How debug Pods are found again: every one carries this label (and `kproxy-doctor/run=ID`, its run). Kept apart
 * from debug-pod.ts so that naming them loads no API client.
 */
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by'
export const MANAGED_BY = 'kproxy-doctor'
export const RUN_LABEL = 'kproxy-doctor/run'

/** The command that removes every debug Pod any run left behind (said when a run starts, and in the README). */
export const LEFTOVER_CLEANUP = `kubectl delete pod -A -l ${MANAGED_BY_LABEL}=${MANAGED_BY}`
