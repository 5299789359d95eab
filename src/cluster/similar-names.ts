/** Names close to `wanted` (edit distance ≤ 2, or one contains the other), closest first. */
export function similarNames(wanted: string, candidates: string[], limit = 3): string[] {
  return candidates
    .map((c) => ({c, d: c.includes(wanted) || wanted.includes(c) ? 1 : editDistance(wanted, c)}))
    .filter((x) => x.c !== wanted && x.d <= 2)
    .sort((a, b) => a.d - b.d || a.c.localeCompare(b.c))
    .slice(0, limit)
    .map((x) => x.c)
}

export function editDistance(a: string, b: string): number {
  const row = Array.from({length: b.length + 1}, (_, i) => i)
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]
    row[0] = i
    for (let j = 1; j <= b.length; j++) {
      const tmp = row[j]
      row[j] = Math.min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1))
      prev = tmp
    }
  }
  return row[b.length]
}
