import {test} from 'node:test'
import assert from 'node:assert/strict'
import {availableParallelism} from 'node:os'
import {cgroupCpuQuota, usableCpus} from '../../src/diagnosis/cpu-limit.js'

/** A machine whose files are these (any other path is unreadable). */
const files = (entries: Record<string, string>) => (path: string) => entries[path]

const CASES: Array<{name: string; files: Record<string, string>; quota: number | undefined}> = [
  {
    name: 'cgroup v2, 2 CPUs',
    files: {'/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/cpu.max': '200000 100000\n'},
    quota: 2,
  },
  {
    name: 'cgroup v2, no limit',
    files: {'/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/cpu.max': 'max 100000\n'},
    quota: undefined,
  },
  {
    name: 'cgroup v2, nested group',
    files: {'/proc/self/cgroup': '0::/ci/job-7\n', '/sys/fs/cgroup/ci/job-7/cpu.max': '150000 100000\n'},
    quota: 1.5,
  },
  {
    name: "cgroup v2, the host's path named but the container's group at the root",
    files: {'/proc/self/cgroup': '0::/docker/abc\n', '/sys/fs/cgroup/cpu.max': '300000 100000\n'},
    quota: 3,
  },
  {
    name: 'cgroup v1, cpu with cpuacct',
    files: {
      '/proc/self/cgroup': '5:memory:/x\n4:cpu,cpuacct:/docker/abc\n',
      '/sys/fs/cgroup/cpu/docker/abc/cpu.cfs_quota_us': '50000\n',
      '/sys/fs/cgroup/cpu/docker/abc/cpu.cfs_period_us': '100000\n',
    },
    quota: 0.5,
  },
  {
    name: 'cgroup v1, no quota (-1)',
    files: {
      '/proc/self/cgroup': '1:cpu:/\n0::/\n',
      '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '-1\n',
      '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000\n',
    },
    quota: undefined,
  },
  {
    name: 'cpuset and cpuacct are not cpu',
    files: {'/proc/self/cgroup': '3:cpuset:/\n2:cpuacct:/a\n', '/sys/fs/cgroup/cpu/a/cpu.cfs_quota_us': '100000\n'},
    quota: undefined,
  },
  {name: 'nothing readable', files: {}, quota: undefined},
  {
    name: 'garbage',
    files: {'/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/cpu.max': 'lots of cpus\n'},
    quota: undefined,
  },
]

for (const c of CASES) {
  test(`CPU quota: ${c.name}`, () => {
    assert.equal(cgroupCpuQuota(files(c.files)), c.quota)
  })
}

test('usable CPUs: the cores, no more than the quota, at least one', () => {
  const cores = availableParallelism()
  assert.equal(usableCpus(files({})), cores)
  assert.equal(usableCpus(files({'/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/cpu.max': '50000 100000\n'})), 1)
  assert.equal(
    usableCpus(files({'/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/cpu.max': `${(cores + 8) * 100000} 100000\n`})),
    cores,
  )
  assert.equal(usableCpus(files({'/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/cpu.max': '150000 100000\n'})), 1)
})
