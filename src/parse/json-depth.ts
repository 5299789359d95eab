/**
 * Whether a parsed JSON document nests deeper than `max` arrays and objects, counted without recursion (a hostile
 * document can nest far deeper than the stack, and a value nested 20,000 arrays deep overflows the stack as soon as
 * anything turns it into text).
 */
export function nestsDeeperThan(root: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[root, 0]]
  while (stack.length > 0) {
    const [x, depth] = stack.pop()!
    if (depth > max) return true
    if (Array.isArray(x)) for (const y of x) stack.push([y, depth + 1])
    else if (x !== null && typeof x === 'object') for (const y of Object.values(x)) stack.push([y, depth + 1])
  }
  return false
}
