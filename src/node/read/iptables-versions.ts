import type {RunResult} from '../transport/node-access.js'

type Family = 4 | 6

/**
 * A node read's `iptables -V` and `ip6tables -V` answers, handed to what runs beside it on the same connection (the
 * live probes' rule counters, which read them to choose their form): the fact is read once, not asked again (over SSH
 * the connection's first exec answers only the first ask; through a Pod each ask is a command). For each family the
 * read says, as soon as it knows, the answer it asked for, or that it asks none (its rules read whole); `close` says
 * that of every family not said yet (the read ended or failed), so nothing waits for it.
 */
export class IptablesVersions {
  private readonly said = new Map<Family, Promise<RunResult | undefined>>()
  private readonly waiting = new Map<Family, (answer: Promise<RunResult | undefined>) => void>()
  private closed = false

  /** The read's answer for the family, or undefined where it asked none (then whoever needs it asks). */
  answer(family: Family): Promise<RunResult | undefined> {
    const said = this.said.get(family)
    if (said) return said
    if (this.closed) return Promise.resolve(undefined)
    const later = new Promise<RunResult | undefined>((resolve) => this.waiting.set(family, resolve))
    this.said.set(family, later)
    return later
  }

  /** What the read asked for the family (undefined: it asks none); said once, the first word holds. */
  say(family: Family, answer: Promise<RunResult> | undefined): void {
    const given = answer ?? Promise.resolve(undefined)
    const waiting = this.waiting.get(family)
    if (waiting) {
      this.waiting.delete(family)
      waiting(given)
    } else if (!this.said.has(family)) this.said.set(family, given)
  }

  /** The read is over: every family not said yet has no answer from it. */
  close(): void {
    this.closed = true
    for (const family of [...this.waiting.keys()]) this.say(family, undefined)
  }
}
