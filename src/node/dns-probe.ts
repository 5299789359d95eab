import type {Duplex} from 'node:stream'

export interface DnsAnswer {
  name: string
  server: string
  /** NOERROR, NXDOMAIN, SERVFAIL, REFUSED, … */
  rcode?: string
  addresses: string[]
  /** How the query was made: "tcp via ssh forward", "dig on node", … */
  method: string
  error?: string
}

const RCODES = ['NOERROR', 'FORMERR', 'SERVFAIL', 'NXDOMAIN', 'NOTIMP', 'REFUSED']

export function buildQuery(name: string, id: number): Buffer {
  const labels = name.split('.').filter(Boolean)
  const qname = Buffer.concat([...labels.map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l, 'ascii')])), Buffer.from([0])])
  const header = Buffer.alloc(12)
  header.writeUInt16BE(id, 0)
  header.writeUInt16BE(0x0100, 2) // recursion desired
  header.writeUInt16BE(1, 4)
  const tail = Buffer.alloc(4)
  tail.writeUInt16BE(1, 0) // A
  tail.writeUInt16BE(1, 2) // IN
  return Buffer.concat([header, qname, tail])
}

function skipName(msg: Buffer, offset: number): number {
  let o = offset
  for (let guard = 0; guard < 128; guard++) {
    const len = msg[o]
    if (len === undefined) throw new Error('truncated name')
    if (len === 0) return o + 1
    if ((len & 0xc0) === 0xc0) return o + 2
    o += len + 1
  }
  throw new Error('name too long')
}

export function parseResponse(msg: Buffer, id: number): {rcode: string; addresses: string[]} {
  if (msg.length < 12) throw new Error('short DNS reply')
  if (msg.readUInt16BE(0) !== id) throw new Error('DNS reply with a foreign id')
  const flags = msg.readUInt16BE(2)
  const qd = msg.readUInt16BE(4)
  const an = msg.readUInt16BE(6)
  let o = 12
  for (let i = 0; i < qd; i++) o = skipName(msg, o) + 4
  const addresses: string[] = []
  for (let i = 0; i < an; i++) {
    o = skipName(msg, o)
    const type = msg.readUInt16BE(o)
    const rdlen = msg.readUInt16BE(o + 8)
    const data = msg.subarray(o + 10, o + 10 + rdlen)
    if (type === 1 && rdlen === 4) addresses.push([...data].join('.'))
    o += 10 + rdlen
  }
  return {rcode: RCODES[flags & 0xf] ?? `RCODE${flags & 0xf}`, addresses}
}

/** Sends one A query over a TCP stream (DNS over TCP, RFC 1035 §4.2.2) and reads the answer. */
export function queryOverStream(stream: Duplex, name: string, timeoutMs: number): Promise<{rcode: string; addresses: string[]}> {
  const id = Math.floor(Math.random() * 0xffff)
  const query = buildQuery(name, id)
  const framed = Buffer.alloc(2 + query.length)
  framed.writeUInt16BE(query.length, 0)
  query.copy(framed, 2)
  return new Promise((resolve, reject) => {
    let got = Buffer.alloc(0)
    const timer = setTimeout(() => finish(new Error(`no DNS answer within ${timeoutMs / 1000}s`)), timeoutMs)
    const finish = (err?: Error, value?: {rcode: string; addresses: string[]}) => {
      clearTimeout(timer)
      stream.removeAllListeners('data')
      stream.destroy()
      if (err) reject(err)
      else resolve(value!)
    }
    stream.on('data', (chunk: Buffer) => {
      got = Buffer.concat([got, chunk])
      if (got.length >= 2 && got.length >= 2 + got.readUInt16BE(0)) {
        try {
          finish(undefined, parseResponse(got.subarray(2, 2 + got.readUInt16BE(0)), id))
        } catch (e) {
          finish(e as Error)
        }
      }
    })
    stream.on('error', (e: Error) => finish(e))
    stream.on('close', () => finish(new Error('the DNS server closed the connection without an answer')))
    stream.write(framed)
  })
}

/** Reads the A records out of `dig +short` or `nslookup` output. */
export function parseLookupOutput(text: string): string[] {
  const out: string[] = []
  let pastServer = false
  for (const line of text.split('\n')) {
    const t = line.trim()
    if (/^\d{1,3}(\.\d{1,3}){3}$/.test(t)) out.push(t)
    else if (/^Name:/.test(t)) pastServer = true
    else if (pastServer) {
      const m = /^Address(?:\s+\d+)?:\s*(\d{1,3}(?:\.\d{1,3}){3})$/.exec(t)
      if (m) out.push(m[1])
    }
  }
  return out
}
