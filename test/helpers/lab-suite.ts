import {after, before} from 'node:test'
import {NetnsLab} from '../lab/netns-lab.js'

/**
 * Brings a lab up before the suite's tests and always down after them, also on SIGINT/SIGTERM, so no namespace or
 * process outlives the run. `ready` receives the lab once it is up (and may prepare it).
 */
export function withLab(ready: (lab: NetnsLab) => void, opts: {dualStack?: boolean} = {}): void {
  let lab: NetnsLab | undefined
  const onSignal = () => {
    lab?.down()
    process.exit(130)
  }
  before(async () => {
    process.once('SIGINT', onSignal)
    process.once('SIGTERM', onSignal)
    lab = new NetnsLab(opts)
    try {
      await lab.up()
      ready(lab)
    } catch (e) {
      lab.down()
      throw e
    }
  })
  after(() => {
    lab?.down()
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
  })
}
