import {closeSync, openSync, readSync, fstatSync} from 'node:fs'

/** Where the bytes of a dump live: a file read on demand, or a buffer already in memory. */
export interface DumpSource {
  readonly size: number
  read(start: number, end: number): Buffer
  /** Calls onChunk with consecutive pieces of the dump, in order. */
  chunks(onChunk: (chunk: Buffer, base: number) => void): void
  close(): void
}

const CHUNK = 4 << 20

export class FileSource implements DumpSource {
  readonly size: number
  private fd: number
  constructor(readonly path: string) {
    this.fd = openSync(path, 'r')
    this.size = fstatSync(this.fd).size
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
  chunks(onChunk: (chunk: Buffer, base: number) => void): void {
    onChunk(this.buf, 0)
  }
  close(): void {}
}
