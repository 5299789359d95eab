import {ParseError} from './parse-error.js'

/** One rule with the kernel's counters of it: how many packets and bytes it has matched since it was made. */
export interface CountedRule {
  /** The rule as `iptables -S` prints it without the counters ("-A KUBE-SVC-… -j KUBE-SEP-…"). */
  rule: string
  packets: bigint
  bytes: bigint
}

/** iptables-save -c: "[PACKETS:BYTES] -A CHAIN …". */
const SAVE_PREFIX = /^\[(\d+):(\d+)\] (-A .*)$/
/** iptables -v -S: "-A CHAIN … -c PACKETS BYTES …" (the counters between the matches and the target). */
const LISTING_COUNTERS = / -c (\d+) (\d+)(?= |$)/

/**
 * A rule line with its counters, in either form iptables prints them: `iptables-save -c`'s "[p:b]" prefix or
 * `iptables -v -S`'s "-c p b" (the rule is given back without them, as the walk's rule text reads). Counters are
 * 64-bit in the kernel: read as bigint. A rule line without counters is an error at its line.
 */
export function parseCountedRule(line: string, lineNo = 1): CountedRule {
  const saved = SAVE_PREFIX.exec(line)
  if (saved) return {rule: saved[3], packets: BigInt(saved[1]), bytes: BigInt(saved[2])}
  if (line.startsWith('-A ')) {
    const m = LISTING_COUNTERS.exec(line)
    if (m)
      return {
        rule: line.slice(0, m.index) + line.slice(m.index + m[0].length),
        packets: BigInt(m[1]),
        bytes: BigInt(m[2]),
      }
  }
  throw new ParseError(lineNo, `not a rule with counters: ${JSON.stringify(line.slice(0, 80))}`, {
    what: 'iptables -v -S output',
  })
}

/**
 * The counted rules of one chain's `iptables -v -S CHAIN` answer (its "-P"/"-N" line first, skipped), in order: the
 * n-th is the chain's rule n.
 */
export function parseCountedChain(lines: string[]): CountedRule[] {
  const rules: CountedRule[] = []
  lines.forEach((line, i) => {
    if (line === '' || line.startsWith('-P ') || line.startsWith('-N ')) return
    rules.push(parseCountedRule(line, i + 1))
  })
  return rules
}
