import {readFileSync} from 'node:fs'
import {availableParallelism} from 'node:os'

/**
 * How many CPUs this process may keep busy: the cores it may run on, and no more than its cgroup's CPU quota (a CI
 * runner or container limited to 2 CPUs on a 64-core host; Node 20's availableParallelism counts only the cores).
 */
export function usableCpus(read: (path: string) => string | undefined = readText): number {
  const cores = availableParallelism()
  const quota = cgroupCpuQuota(read)
  return quota === undefined ? cores : Math.max(1, Math.min(cores, Math.floor(quota)))
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return undefined
  }
}

/** The CPU quota of this process' cgroup (v2 cpu.max, or v1 cfs quota and period) in CPUs; undefined when none is set. */
export function cgroupCpuQuota(read: (path: string) => string | undefined): number | undefined {
  const groups = read('/proc/self/cgroup') ?? ''
  const v2 = /^0::(\S*)$/m.exec(groups)?.[1]
  // A container sees its own cgroup at the mount's root even where /proc/self/cgroup names the host's path.
  const under = (root: string, path: string, file: string) =>
    read(`${root}${path === '/' ? '' : path}/${file}`) ?? read(`${root}/${file}`)
  if (v2 !== undefined) {
    const max = under('/sys/fs/cgroup', v2, 'cpu.max')
    if (max !== undefined) return quotaOf(max.trim().split(/\s+/))
  }
  const v1 = /^\d+:(?:[^:]*,)?cpu(?:,[^:]*)?:(\S*)$/m.exec(groups)?.[1]
  if (v1 !== undefined) {
    const quota = under('/sys/fs/cgroup/cpu', v1, 'cpu.cfs_quota_us')
    const period = under('/sys/fs/cgroup/cpu', v1, 'cpu.cfs_period_us')
    if (quota !== undefined && period !== undefined) return quotaOf([quota.trim(), period.trim()])
  }
  return undefined
}

/** "max 100000" and "-1 100000" are no quota; "150000 100000" is 1.5 CPUs. */
function quotaOf([quota, period]: string[]): number | undefined {
  const q = Number(quota)
  const p = Number(period)
  return Number.isFinite(q) && q > 0 && Number.isFinite(p) && p > 0 ? q / p : undefined
}
