/**
 * Whether a parsed JSON document nests deeper than `max` arrays and objects (a value inside `max` nested arrays or
 * objects is `max` deep). The walk goes no deeper than `max + 1`: a hostile document can nest far deeper than the stack,
 * and a value nested 20,000 arrays deep overflows the stack as soon as anything turns it into text.
 */
export function nestsDeeperThan(root: unknown, max: number): boolean {
  if (max < 0) return true
  return typeof root === 'object' && root !== null && holdsDeeper(root, max)
}

/**
 * Whether a value more than `levels` deep is inside `x`. No call per value and nothing allocated: a walk that pushed
 * every value on a stack of its own was optimised by V8 as a snapshot's JSON was read, a compile that cost a short run
 * more than the walk.
 */
function holdsDeeper(x: object, levels: number): boolean {
  if (Array.isArray(x)) {
    if (levels === 0) return x.length > 0
    for (let i = 0; i < x.length; i++) {
      const y: unknown = x[i]
      if (typeof y === 'object' && y !== null && holdsDeeper(y, levels - 1)) return true
    }
    return false
  }
  // A parsed document's objects have only their own enumerable keys (Object.prototype has none).
  for (const key in x) {
    if (levels === 0) return true
    const y: unknown = (x as Record<string, unknown>)[key]
    if (typeof y === 'object' && y !== null && holdsDeeper(y, levels - 1)) return true
  }
  return false
}
