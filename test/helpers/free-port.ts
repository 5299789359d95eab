import {createServer} from 'node:net'

/** A TCP port on 127.0.0.1 that was free a moment ago (the kernel's pick), for a server a test starts. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as {port: number}).port
      s.close(() => resolve(port))
    })
    s.on('error', reject)
  })
}
