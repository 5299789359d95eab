import {closeSync, fstatSync, lstatSync, openSync, readSync, constants} from 'node:fs'
import {FileSource} from './dump-source.js'

/** Snapshot and dump files are never larger than this: a bigger one is refused, not read into memory. */
const MAX_INPUT_BYTES = 2 * 1024 ** 3

class UnsafeFileError extends Error {}

/**
 * Reads a file given as input (a snapshot's content), refusing what a bundle never holds: a symlink (it could point at
 * /etc/shadow), a FIFO or device (/dev/zero never ends), a file over `maxBytes`.
 */
export function readRegularFile(path: string, maxBytes = MAX_INPUT_BYTES): Buffer {
  const fd = openChecked(path, maxBytes)
  try {
    const stat = fstatSync(fd)
    const out = Buffer.allocUnsafe(stat.size)
    let done = 0
    while (done < out.length) {
      const n = readSync(fd, out, done, out.length - done, done)
      if (n === 0) break
      done += n
    }
    return out.subarray(0, done)
  } finally {
    closeSync(fd)
  }
}

/** The same checks as readRegularFile, the file left on disk: its bytes are read as a reader asks for them. */
export function openRegularFile(path: string, maxBytes = MAX_INPUT_BYTES): FileSource {
  return new FileSource(path, openChecked(path, maxBytes))
}

/** Opens `path` for reading after refusing a symlink, a non-regular file or one over `maxBytes`. */
function openChecked(path: string, maxBytes: number): number {
  const link = lstatSync(path)
  if (link.isSymbolicLink()) throw new UnsafeFileError(`${path} is a symbolic link: a bundle holds only regular files`)
  if (!link.isFile()) throw new UnsafeFileError(`${path} is not a regular file`)
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW)
  try {
    const stat = fstatSync(fd)
    if (!stat.isFile()) throw new UnsafeFileError(`${path} is not a regular file`)
    if (stat.size > maxBytes)
      throw new UnsafeFileError(`${path} is ${stat.size} bytes, over the ${maxBytes}-byte limit`)
    return fd
  } catch (e) {
    closeSync(fd)
    throw e
  }
}
