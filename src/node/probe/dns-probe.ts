import type {Duplex} from 'node:stream'
import * as dnsPacket from 'dns-packet'
import {parseIp} from '../../net/address.js'
import {RECORD_FAMILY, type DnsRecordType} from '../../parse/dns-lookup.js'

/** What the question for one record type got. */
export interface DnsRecordAnswer {
  type: DnsRecordType
  /** NOERROR, NXDOMAIN, SERVFAIL, REFUSED, … */
  rcode?: string
  /** The addresses of this type in the answer section. */
  addresses: string[]
  error?: string
}

export interface DnsAnswer {
  name: string
  server: string
  /** How the questions were put: "DNS over TCP through an SSH port forward", "dig/nslookup on the node", "none". */
  method: string
  /** One per record type asked, in the order asked; a type missing here was not asked (older bundles ask A only). */
  answers: DnsRecordAnswer[]
  /** Why nothing could be asked (method "none"). */
  error?: string
}

/** dns-packet sets the response code on the decoded header; its typings leave it out. */
type DecodedReply = dnsPacket.DecodedPacket & {rcode?: string}

export function buildQuery(name: string, type: DnsRecordType, id: number): Buffer {
  return dnsPacket.encode({
    type: 'query',
    id,
    flags: dnsPacket.RECURSION_DESIRED,
    questions: [{type, name, class: 'IN'}],
  })
}

/** The reply to the query `id` for `type`: its response code and the addresses of that type (CNAMEs followed by the server). */
export function parseResponse(msg: Buffer, type: DnsRecordType, id: number): {rcode: string; addresses: string[]} {
  let reply: DecodedReply
  try {
    reply = dnsPacket.decode(msg)
  } catch (e) {
    throw new Error(`malformed DNS reply (${(e as Error).message})`, {cause: e})
  }
  // dns-packet reads record data past the end of a cut-off message without a word: its byte count tells.
  if (dnsPacket.decode.bytes > msg.length)
    throw new Error(`malformed DNS reply (cut off: ${msg.length} of ${dnsPacket.decode.bytes} bytes)`)
  if (reply.id !== id) throw new Error('DNS reply with a foreign id')
  if (reply.type !== 'response') throw new Error('DNS message is not a reply')
  if (reply.flag_tc) throw new Error('truncated DNS reply (TC set)')
  const addresses = (reply.answers ?? []).flatMap((a) => {
    const ip = a.type === type && typeof a.data === 'string' ? parseIp(a.data) : undefined
    return ip?.family === RECORD_FAMILY[type] ? [ip.text] : []
  })
  return {rcode: reply.rcode ?? 'NOERROR', addresses}
}

/** Sends one query for `type` over a TCP stream (DNS over TCP, RFC 1035 §4.2.2) and reads the answer; the stream is closed after. */
export function queryOverStream(
  stream: Duplex,
  name: string,
  type: DnsRecordType,
  timeoutMs: number,
): Promise<{rcode: string; addresses: string[]}> {
  const id = Math.floor(Math.random() * 0xffff)
  const query = buildQuery(name, type, id)
  const framed = Buffer.alloc(2 + query.length)
  framed.writeUInt16BE(query.length, 0)
  query.copy(framed, 2)
  return new Promise((resolve, reject) => {
    let got = Buffer.alloc(0)
    let done = false
    const timer = setTimeout(() => finish(new Error(`no DNS answer within ${timeoutMs / 1000}s`)), timeoutMs)
    const finish = (err?: Error, value?: {rcode: string; addresses: string[]}) => {
      if (done) return
      done = true
      clearTimeout(timer)
      stream.removeAllListeners('data')
      stream.destroy()
      if (err) reject(err)
      else resolve(value!)
    }
    stream.on('data', (chunk: Buffer) => {
      got = Buffer.concat([got, chunk])
      if (got.length < 2 || got.length < 2 + got.readUInt16BE(0)) return
      try {
        finish(undefined, parseResponse(got.subarray(2, 2 + got.readUInt16BE(0)), type, id))
      } catch (e) {
        finish(e as Error)
      }
    })
    stream.on('error', (e: Error) => finish(e))
    stream.on('close', () => finish(new Error('the DNS server closed the connection without an answer')))
    stream.write(framed)
  })
}
