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

/** An `iptables-save -c` chain declaration: ":CHAIN POLICY [PACKETS:BYTES]". */
const DECLARATION = /^:(\S+) \S+ \[\d+:\d+\]$/

/**
 * The counted rules of the `wanted` chains in one table's `iptables-save -c -t TABLE` answer, by chain, each in order
 * (the n-th is the chain's rule n, as `iptables -v -S CHAIN` lists them); a wanted chain the table does not declare is
 * not in the map. Only the wanted chains' rules are parsed: at 10,000 Services the nat table holds 100,000 others.
 */
export function parseCountedTable(text: string, wanted: ReadonlySet<string>): Map<string, CountedRule[]> {
  const chains = new Map<string, CountedRule[]>()
  let tables = 0
  let lineNo = 0
  for (let start = 0; start < text.length;) {
    const nl = text.indexOf('\n', start)
    const end = nl < 0 ? text.length : nl
    const line = text.slice(start, end > start && text.charCodeAt(end - 1) === 13 ? end - 1 : end)
    start = end + 1
    lineNo++
    const first = line.charCodeAt(0)
    if (first === 0x5b /* [ */) {
      const at = line.indexOf('] -A ')
      const nameEnd = at < 0 ? -1 : line.indexOf(' ', at + 5)
      const chain = at < 0 ? undefined : line.slice(at + 5, nameEnd < 0 ? line.length : nameEnd)
      if (chain === undefined || !wanted.has(chain)) {
        if (chain === undefined) parseCountedRule(line, lineNo)
        continue
      }
      const rules = chains.get(chain)
      if (!rules)
        throw new ParseError(lineNo, `a rule of ${chain} before its ":${chain}" line`, {
          what: 'iptables-save -c output',
        })
      rules.push(parseCountedRule(line, lineNo))
    } else if (first === 0x3a /* : */) {
      const m = DECLARATION.exec(line)
      if (!m)
        throw new ParseError(lineNo, `not a chain declaration: ${JSON.stringify(line.slice(0, 80))}`, {
          what: 'iptables-save -c output',
        })
      if (wanted.has(m[1])) chains.set(m[1], [])
    } else if (first === 0x2a /* * */) {
      if (++tables > 1)
        throw new ParseError(lineNo, 'a second table where one was asked for', {what: 'iptables-save -c output'})
    } else if (line !== '' && line !== 'COMMIT' && first !== 0x23 /* # */)
      throw new ParseError(lineNo, `not iptables-save -c output: ${JSON.stringify(line.slice(0, 80))}`, {
        what: 'iptables-save -c output',
      })
  }
  if (tables === 0)
    throw new ParseError(0, 'no "*table" line: not iptables-save output', {what: 'iptables-save -c output'})
  return chains
}
