/** At most `limit` holders at once; the others wait their turn, first come first served. */
export class Slots {
  private held = 0
  private readonly waiting: Array<() => void> = []

  constructor(private readonly limit: number) {}

  /** Runs `work` in a slot, waiting for one to free first when all are held. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.held >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve))
    this.held++
    try {
      return await work()
    } finally {
      this.held--
      this.waiting.shift()?.()
    }
  }
}
