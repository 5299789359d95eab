/**
 * The tests' seeded generators: the same numbers every run, so that a failure replays from its seed. Nothing here is
 * for secrets.
 */

/** Mulberry32: floats in [0, 1) and what is made of them. */
export class Prng {
  private state: number
  constructor(seed: number) {
    this.state = seed >>> 0
  }
  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0
    let t = this.state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  int(max: number): number {
    return Math.floor(this.next() * max)
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]
  }
  chance(p: number): boolean {
    return this.next() < p
  }
}

/**
 * A linear congruential generator (glibc's constants), for the tests whose data was made with it (names to sort,
 * strings to measure): each call an integer in [0, n).
 */
export function lcg(seed: number): (n: number) => number {
  let state = seed
  return (n) => {
    state = (state * 1103515245 + 12345) & 0x7fffffff
    return state % n
  }
}
