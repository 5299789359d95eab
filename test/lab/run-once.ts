import {cpSync, existsSync, mkdtempSync, renameSync, rmSync} from 'node:fs'
import {join} from 'node:path'

/**
 * Set-up that every lab repeats and that labs side by side may share (host key pairs, the test API server's
 * certificate): made once per test run in the run's folder (KPD_TEST_RUN_DIR, made and removed by
 * test/run-tests.mjs) and copied from there into `dest`; made in `dest` when no run folder is given (a file run on its
 * own, the bench). `make` writes its files into the folder it is given. Two labs making the same thing at once both
 * make it; the first to rename its folder into place wins, and both copy the winner's.
 */
export function madeOncePerRun(name: string, dest: string, make: (dir: string) => void): void {
  const runDir = process.env.KPD_TEST_RUN_DIR
  if (!runDir || !existsSync(runDir)) return make(dest)
  const shared = join(runDir, name)
  if (!existsSync(shared)) {
    const fresh = mkdtempSync(join(runDir, `.${name}-`))
    make(fresh)
    try {
      renameSync(fresh, shared)
    } catch {
      rmSync(fresh, {recursive: true, force: true})
    }
  }
  cpSync(shared, dest, {recursive: true})
}
