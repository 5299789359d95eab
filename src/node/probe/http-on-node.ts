import type {OpenTcp} from './tcp-probe.js'

export interface HttpAnswer {
  status: number
  body: string
}

/** A plain HTTP/1.0 GET to 127.0.0.1:port on the node, over a stream the node opens: nothing to install there. */
export async function httpGetOnNode(open: OpenTcp, port: number, path: string, timeoutMs: number): Promise<HttpAnswer> {
  const stream = await open('127.0.0.1', port)
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    const timer = setTimeout(() => {
      stream.destroy()
      reject(new Error(`GET 127.0.0.1:${port}${path} on the node did not answer within ${timeoutMs / 1000}s`))
    }, timeoutMs)
    stream.on('data', (c: Buffer) => {
      // kube-proxy's /metrics is a few hundred kB at most; stop reading well past that.
      if ((size += c.length) < 8 << 20) chunks.push(c)
    })
    stream.on('error', (e: Error) => {
      clearTimeout(timer)
      reject(e)
    })
    stream.on('close', () => {
      clearTimeout(timer)
      const text = Buffer.concat(chunks).toString('utf8')
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(text)
      if (!m) return reject(new Error(`127.0.0.1:${port}${path} on the node did not answer HTTP`))
      const split = text.indexOf('\r\n\r\n')
      resolve({status: Number(m[1]), body: split >= 0 ? text.slice(split + 4) : ''})
    })
    stream.end(`GET ${path} HTTP/1.0\r\nHost: 127.0.0.1:${port}\r\nUser-Agent: kproxy-doctor\r\n\r\n`)
  })
}
