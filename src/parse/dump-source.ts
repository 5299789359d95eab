import {closeSync, openSync, readSync, fstatSync} from 'node:fs'

/** Where the bytes of a dump live: a file read on demand, or a buffer already in memory. */
export interface DumpSource {
  readonly size: number
  read(start: number, end: number): Buffer
  /** Reads the bytes from `start` into `target` (as many as fit, fewer at the end); returns how many it read. */
  readInto(target: Buffer, start: number): number
  /** Calls onChunk with consecutive pieces of the dump, in order. */
  chunks(onChunk: (chunk: Buffer, base: number) => void): void
  close(): void
}

const CHUNK = 4 << 20

export class FileSource implements DumpSource {
  readonly size: number
  private fd: number
  /** `fd`: a descriptor already opened (and checked) for `path`, which the source then owns. */
  constructor(
    readonly path: string,
    fd?: number,
  ) {
    this.fd = fd ?? openSync(path, 'r')
    const stat = fstatSync(this.fd)
    // A directory opens, and only its first read fails, with an EISDIR that names no path.
    if (stat.isDirectory()) {
      closeSync(this.fd)
      throw new Error('it is a directory, not a dump file')
    }
    this.size = stat.size
  }
  read(start: number, end: number): Buffer {
    const out = Buffer.allocUnsafe(end - start)
    let done = 0
    while (done < out.length) {
      const n = readSync(this.fd, out, done, out.length - done, start + done)
      if (n === 0) break
      done += n
    }
    return out.subarray(0, done)
  }
  readInto(target: Buffer, start: number): number {
    let done = 0
    while (done < target.length) {
      const n = readSync(this.fd, target, done, target.length - done, start + done)
      if (n === 0) break
      done += n
    }
    return done
  }
  chunks(onChunk: (chunk: Buffer, base: number) => void): void {
    const buf = Buffer.allocUnsafe(CHUNK)
    let base = 0
    for (;;) {
      const n = readSync(this.fd, buf, 0, CHUNK, base)
      if (n <= 0) break
      onChunk(buf.subarray(0, n), base)
      base += n
    }
  }
  close(): void {
    closeSync(this.fd)
  }
}

export class BufferSource implements DumpSource {
  readonly size: number
  constructor(private readonly buf: Buffer) {
    this.size = buf.length
  }
  read(start: number, end: number): Buffer {
    return this.buf.subarray(start, end)
  }
  readInto(target: Buffer, start: number): number {
    return start >= this.size ? 0 : this.buf.copy(target, 0, start)
  }
  chunks(onChunk: (chunk: Buffer, base: number) => void): void {
    onChunk(this.buf, 0)
  }
  close(): void {}
}

/** Largest dump read whole into memory (nft text or JSON, ipvsadm, ipset): far above any real node's output. */
export const MAX_TEXT_DUMP_BYTES = 512 << 20
/** Largest iptables-save file indexed (it is streamed, not held in memory). */
export const MAX_STREAMED_DUMP_BYTES = 4 * 2 ** 30

class InputTooLargeError extends Error {}

/** Reads a whole dump ("-" is stdin), refusing one larger than `maxBytes` with a clear message. */
export function readDumpBytes(file: string, maxBytes = MAX_TEXT_DUMP_BYTES): Buffer {
  const name = file === '-' ? 'stdin' : file
  const fd = file === '-' ? 0 : openSync(file, 'r')
  try {
    // A directory opens, and only its first read fails, with an EISDIR that names no path.
    if (file !== '-' && fstatSync(fd).isDirectory()) throw new Error('it is a directory, not a dump file')
    if (file !== '-' && fstatSync(fd).size > maxBytes)
      throw new InputTooLargeError(
        `${name} is larger than ${Math.round(maxBytes / 2 ** 20)} MiB: not a dump this tool reads`,
      )
    const parts: Buffer[] = []
    let total = 0
    if (file !== '-') {
      // A file's bytes go straight into one buffer of its size: no second copy (a 137 MB ruleset was held three times
      // over, as reads, their concatenation and its text). It is read on below if it grew since fstat.
      const whole = Buffer.allocUnsafe(fstatSync(fd).size)
      while (total < whole.length) {
        const n = readSync(fd, whole, total, whole.length - total, null)
        if (n <= 0) return whole.subarray(0, total)
        total += n
      }
      parts.push(whole)
    }
    const chunk = Buffer.allocUnsafe(1 << 20)
    for (;;) {
      let n: number
      try {
        n = readSync(fd, chunk, 0, chunk.length, null)
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'EAGAIN') continue
        if ((e as NodeJS.ErrnoException).code === 'EOF') break
        throw e
      }
      if (n <= 0) break
      total += n
      if (total > maxBytes)
        throw new InputTooLargeError(
          `${name} is larger than ${Math.round(maxBytes / 2 ** 20)} MiB: not a dump this tool reads`,
        )
      // Buffer.from(a Buffer) copies through the typed-array constructor (half a second in a CPU profile of a 137 MB
      // ruleset read from a pipe); copy() is one memcpy.
      const part = Buffer.allocUnsafeSlow(n)
      chunk.copy(part, 0, 0, n)
      parts.push(part)
    }
    return parts.length === 1 ? parts[0] : Buffer.concat(parts)
  } finally {
    if (file !== '-') closeSync(fd)
  }
}
