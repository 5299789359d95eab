import {existsSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {readRegularFile} from '../../parse/regular-file.js'
import type {NodeProbes} from './tcp-probe.js'

/** The file of a node's folder of a bundle that holds its probes' kernel evidence, as collected. */
export const KERNEL_EVIDENCE_FILE = 'kernel-evidence.json'

/** What `collect --probe` recorded of one node's probes: the tallies, conntrack's entries and any netfilter trace. */
interface RecordedKernelEvidence {
  apiVersion: 'kproxy-doctor/v1'
  kind: 'KernelEvidence'
  /** When the probes ran (the bundle's collection), ISO 8601. */
  recordedAt: string
  probes: NodeProbes
}

/** Writes a node's probes into its folder of a bundle being built (0600, created only). */
export function writeRecordedEvidence(dir: string, probes: NodeProbes, recordedAt: string): void {
  const record: RecordedKernelEvidence = {apiVersion: 'kproxy-doctor/v1', kind: 'KernelEvidence', recordedAt, probes}
  writeFileSync(join(dir, KERNEL_EVIDENCE_FILE), JSON.stringify(record, null, 2) + '\n', {mode: 0o600, flag: 'wx'})
}

function isRecord(v: unknown): v is RecordedKernelEvidence {
  if (typeof v !== 'object' || v === null) return false
  const r = v as Partial<RecordedKernelEvidence>
  return (
    r.apiVersion === 'kproxy-doctor/v1' &&
    r.kind === 'KernelEvidence' &&
    typeof r.recordedAt === 'string' &&
    typeof r.probes === 'object' &&
    r.probes !== null &&
    typeof r.probes.node === 'string' &&
    Array.isArray(r.probes.tallies)
  )
}

/**
 * A node's recorded probes from its folder of a bundle: undefined where none were recorded (an older bundle, or one
 * collected without --probe); a file that is not one is an error naming it.
 */
export function readRecordedEvidence(dir: string, node: string): {recordedAt: string; probes: NodeProbes} | undefined {
  const path = join(dir, KERNEL_EVIDENCE_FILE)
  if (!existsSync(path)) return undefined
  let parsed: unknown
  try {
    parsed = JSON.parse(readRegularFile(path).toString('utf8'))
  } catch (e) {
    throw new Error(`${KERNEL_EVIDENCE_FILE} of ${node}: ${(e as Error).message}`, {cause: e})
  }
  if (!isRecord(parsed) || parsed.probes.node !== node)
    throw new Error(`${KERNEL_EVIDENCE_FILE} of ${node}: not the kernel evidence of this node`)
  return {recordedAt: parsed.recordedAt, probes: parsed.probes}
}
