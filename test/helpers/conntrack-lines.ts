import {parseConntrackList} from '../../src/parse/conntrack.js'
import {matchProbeEntries, type KernelEvidence, type KernelAnswer} from '../../src/node/probe/kernel-evidence.js'

/**
 * One `conntrack -L` line as the kernel prints a probe's entry: from `src`, to `dst:dport`, sent by the kernel to
 * `endpoint` (ip:port; the destination itself when not translated), with the state and flags each answer leaves: a
 * reply (TIME_WAIT, ASSURED), a reset (CLOSE), none (SYN_SENT, UNREPLIED). `age` seconds since its last packet.
 */
export function conntrackLine(
  src: string,
  dst: string,
  dport: number,
  endpoint: string,
  answer: KernelAnswer,
  sport: number,
  age = 1,
): string {
  const [epIp, epPort] = endpoint.split(':')
  const original = `src=${src} dst=${dst} sport=${sport} dport=${dport}`
  const reply = `src=${epIp} dst=${src} sport=${epPort} dport=${sport}`
  if (answer === 'no reply') return `tcp      6 ${120 - age} SYN_SENT ${original} [UNREPLIED] ${reply} mark=0 use=1`
  if (answer === 'reset') return `tcp      6 ${10 - age} CLOSE ${original} ${reply} mark=0 use=1`
  return `tcp      6 ${120 - age} TIME_WAIT ${original} ${reply} [ASSURED] mark=0 use=1`
}

/**
 * A node's kernel evidence from recorded `conntrack -L` text, one text per probed address ("host:port" → lines),
 * matched to `attempts` probes made `elapsedMs` before the read, as readKernelEvidence does.
 */
export function kernelFrom(texts: Record<string, string[]>, attempts = 8, elapsedMs = 3000): KernelEvidence {
  return {
    read: true,
    targets: Object.entries(texts).map(([address, lines]) => {
      const [host, port] = [
        address.slice(0, address.lastIndexOf(':')),
        Number(address.slice(address.lastIndexOf(':') + 1)),
      ]
      const entries = parseConntrackList(lines.join('\n') + '\n')
      return {host, port, ...matchProbeEntries(entries, {host, port, attempts}, elapsedMs)}
    }),
  }
}

/** Eight probes of `dst:dport` from `src`, sent in turn to `endpoints` (each with its answer). */
export function probeLines(
  src: string,
  dst: string,
  dport: number,
  endpoints: Array<[endpoint: string, answer: KernelAnswer]>,
  count = 8,
): string[] {
  return Array.from({length: count}, (_, i) => {
    const [endpoint, answer] = endpoints[i % endpoints.length]
    return conntrackLine(src, dst, dport, endpoint, answer, 40000 + i)
  })
}
