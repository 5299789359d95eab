import {FileSource, type DumpSource} from '../../parse/dump-source.js'
import {openRegularFile} from '../../parse/regular-file.js'
import {parseNodeRecording} from './recording.js'
import type {NodeFile, NodeRecording} from './node-files.js'
import type {NodeObservation} from '../observation.js'

/**
 * One node's reads as data another thread can take: each file's bytes in memory shared between the threads (copied
 * once, never per thread), a dump left on disk by its path (each thread opens its own).
 */
export interface SharedNodeReads {
  name: string
  files: Array<[NodeFile, Uint8Array]>
  onDisk: Array<[NodeFile, string]>
}

/** Copies a node's recording into memory every thread can read; dumps left on disk are passed by path. */
export function shareNodeReads(
  name: string,
  rec: NodeRecording,
  onDisk: Map<NodeFile, DumpSource> = new Map(),
): SharedNodeReads {
  const files = [...rec].map(([file, bytes]): [NodeFile, Uint8Array] => {
    const shared = new Uint8Array(new SharedArrayBuffer(bytes.length))
    shared.set(bytes)
    return [file, shared]
  })
  const paths = [...onDisk].map(([file, source]): [NodeFile, string] => {
    if (!(source instanceof FileSource)) throw new Error(`${name}: ${file} is neither in memory nor a file`)
    return [file, source.path]
  })
  return {name, files, onDisk: paths}
}

/** Parses shared reads on this thread as parseNodeRecording does; `close` releases the dumps it opened. */
export function parseSharedNodeReads(reads: SharedNodeReads): {observation: NodeObservation; close(): void} {
  const rec: NodeRecording = new Map(
    reads.files.map(([file, bytes]) => [file, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length)]),
  )
  const onDisk = new Map<NodeFile, DumpSource>()
  const close = () => {
    for (const source of onDisk.values()) source.close()
  }
  try {
    for (const [file, path] of reads.onDisk) onDisk.set(file, openRegularFile(path))
    return {observation: parseNodeRecording(reads.name, rec, onDisk), close}
  } catch (e) {
    close()
    throw e
  }
}
