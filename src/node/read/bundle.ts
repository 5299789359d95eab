import {existsSync, mkdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import type {DumpSource} from '../../parse/dump-source.js'
import {openRegularFile, readRegularFile} from '../../parse/regular-file.js'
import {BACKEND_SAVES, NODE_READS} from './node-reads.js'
import type {NodeObservation} from '../observation.js'
import {errorRecording, NODE_FILES, type NodeFile, type NodeRecording} from './node-files.js'
import {parseNodeRecording} from './recording.js'

/** The iptables dumps of a snapshot: left on disk when large and read chain by chain as the diagnosis asks. */
const DUMPS_ON_DISK: ReadonlySet<NodeFile> = new Set(
  (['iptablesSave', 'ip6tablesSave', ...BACKEND_SAVES.map((b) => b.command)] as const).map(
    (key) => NODE_READS[key].recorded.file,
  ),
)
const ON_DISK_OVER_BYTES = 8 << 20

/** Loads a node's folder of a bundle into memory (only the files a bundle holds). */
export function loadNodeRecording(dir: string): NodeRecording | undefined {
  return loadNodeFiles(dir, false)?.rec
}

/**
 * How many bytes of large iptables dumps may still be loaded into memory rather than read from disk chain by chain.
 * `svc` and `trace` load none (one Service reads a few chains of a dump); a scan reads every Service's chains, one
 * read per chain per node, so it loads dumps whole while they fit its budget.
 */
export interface DumpMemoryBudget {
  bytes: number
}

const NO_DUMP_IN_MEMORY: DumpMemoryBudget = {bytes: 0}

function loadNodeFiles(
  dir: string,
  largeDumpsOnDisk: boolean,
  budget: DumpMemoryBudget = NO_DUMP_IN_MEMORY,
): {rec: NodeRecording; onDisk: Map<NodeFile, DumpSource>} | undefined {
  if (!existsSync(dir)) return undefined
  const rec: NodeRecording = new Map()
  const onDisk = new Map<NodeFile, DumpSource>()
  for (const f of Object.values(NODE_FILES)) {
    const path = join(dir, f)
    if (!existsSync(path)) continue
    try {
      if (largeDumpsOnDisk && DUMPS_ON_DISK.has(f)) {
        const source = openRegularFile(path)
        if (source.size > ON_DISK_OVER_BYTES && source.size > budget.bytes) {
          onDisk.set(f, source)
          continue
        }
        if (source.size > ON_DISK_OVER_BYTES) budget.bytes -= source.size
        source.close()
      }
      rec.set(f, readRegularFile(path))
    } catch (e) {
      // A symlink, FIFO or device in a bundle: that node is unreadable, named with the file; no byte of it is read.
      for (const source of onDisk.values()) source.close()
      return {rec: errorRecording(`${f}: ${(e as Error).message}`), onDisk: new Map()}
    }
  }
  return {rec, onDisk}
}

/**
 * Loads a node's folder of a snapshot bundle; a large iptables dump is left on disk past the budget (see
 * DUMPS_ON_DISK). A folder that is not there is the node's error.
 */
export function loadNodeBundle(
  dir: string,
  budget?: DumpMemoryBudget,
): {rec: NodeRecording; onDisk: Map<NodeFile, DumpSource>} {
  return loadNodeFiles(dir, true, budget) ?? {rec: errorRecording('not in the snapshot'), onDisk: new Map()}
}

/** Reads a node's folder of a snapshot bundle; a large iptables dump is not loaded whole (see DUMPS_ON_DISK). */
export function readNodeBundle(dir: string, name: string, budget?: DumpMemoryBudget): NodeObservation {
  const {rec, onDisk} = loadNodeBundle(dir, budget)
  return parseNodeRecording(name, rec, onDisk)
}

/** Writes a node's recording as its folder of a bundle. */
export function writeNodeRecording(dir: string, rec: NodeRecording): void {
  mkdirSync(dir, {recursive: true})
  for (const [f, content] of rec) writeFileSync(join(dir, f), content, {mode: 0o600})
}
