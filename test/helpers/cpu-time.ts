/**
 * Runs f and returns its value with the CPU time this process spent (user + system, ms). CPU time, unlike wall time,
 * does not grow when other processes load the machine, so bounds on it stay meaningful on a busy CI runner.
 */
export function cpuTimed<T>(f: () => T): {value: T; ms: number} {
  const before = process.cpuUsage()
  const value = f()
  const used = process.cpuUsage(before)
  return {value, ms: (used.user + used.system) / 1000}
}
