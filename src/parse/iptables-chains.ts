/** What follows each chain's answer in a chain by chain read of the rules: "#kpd-chain EXIT". */
export const CHAIN_TRAILER = '#kpd-chain '

/** One chain by chain read's output split at its trailers: each chain's lines and exit status, or undefined. */
export function splitChainAnswers(out: string, count: number): Array<{code: number; lines: string[]}> | undefined {
  const lines = out.split('\n')
  if (lines.at(-1) === '') lines.pop()
  const answers: Array<{code: number; lines: string[]}> = []
  let current: string[] = []
  for (const line of lines) {
    if (line.startsWith(CHAIN_TRAILER)) {
      answers.push({code: Number(line.slice(CHAIN_TRAILER.length)), lines: current})
      current = []
    } else current.push(line)
  }
  return answers.length === count && current.length === 0 ? answers : undefined
}

/**
 * One `iptables -t T -S C` answer: "-P C POLICY" (a built-in chain) or "-N C", then "-A C …" lines. Its policy ("-"
 * for a user chain) and rules, or what is wrong with it.
 */
export function parseChainListing(
  lines: string[],
  read: {table: string; chain: string; builtin: boolean},
): {policy: string; rules: string[]} | {wrong: string} {
  const head = lines[0]?.split(' ') ?? []
  if (
    read.builtin
      ? head[0] !== '-P' || head[1] !== read.chain || head.length !== 3
      : head[0] !== '-N' || head[1] !== read.chain || head.length !== 2
  )
    return {
      wrong: `iptables -t ${read.table} -S ${read.chain} began with ${JSON.stringify(lines[0]?.slice(0, 80) ?? '')}`,
    }
  const rules: string[] = []
  for (const line of lines.slice(1)) {
    if (!line.startsWith(`-A ${read.chain} `))
      return {wrong: `iptables -t ${read.table} -S ${read.chain} printed ${JSON.stringify(line.slice(0, 80))}`}
    rules.push(line)
  }
  return {policy: read.builtin ? head[2] : '-', rules}
}
