import type {ChildProcess} from 'node:child_process'
import {copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {NODES} from '../fixtures/lab-cluster.js'
import {startSshdInNs, writeSshdConfig} from './lab-sshd.js'
import type {NetnsLab} from './netns-lab.js'
import {sleep, tryRun} from './sh.js'

/**
 * A lab node's sshd swapped for a hostile one: the same host key and authorized keys, its commands finding `fakes`
 * (program name → shell body) first on PATH, so a node can flood, answer with a gzip bomb or print controls. `dir` is
 * the test's own folder; `restore` puts the lab's sshd back. Every sshd it starts is killed by `stopAll`.
 */
export class HostileSshd {
  private readonly procs: ChildProcess[] = []
  readonly logs: string[] = []

  constructor(
    private readonly lab: NetnsLab,
    private readonly dir: string,
  ) {
    copyFileSync(join(lab.dir, 'authorized_keys'), join(dir, 'authorized_keys'))
  }

  async start(nodeName: string, fakes: Record<string, string>): Promise<void> {
    const node = NODES.find((n) => n.name === nodeName)!
    const bin = join(this.dir, `bin-${node.key}`)
    mkdirSync(bin, {recursive: true})
    for (const [name, body] of Object.entries(fakes))
      writeFileSync(join(bin, name), `#!/bin/sh\n${body}\n`, {mode: 0o755})
    const wrapper = join(this.dir, `command-${node.key}.sh`)
    writeFileSync(wrapper, `#!/bin/sh\nPATH=${bin}:$PATH\nexport PATH\nexec /bin/sh -c "$SSH_ORIGINAL_COMMAND"\n`, {
      mode: 0o755,
    })
    const labPid = join(this.lab.dir, `sshd-${node.key}.pid`)
    if (existsSync(labPid)) {
      tryRun('kill', [readFileSync(labPid, 'utf8').trim()])
      for (let i = 0; i < 50 && existsSync(labPid); i++) await sleep(100)
    }
    for (const f of [`hostkey-${node.key}`, `hostkey-${node.key}.pub`])
      copyFileSync(join(this.lab.dir, f), join(this.dir, f))
    const cfg = writeSshdConfig(this.dir, node.key, {forwarding: true, forceCommand: wrapper})
    this.procs.push(startSshdInNs(this.lab.nodeNs(node), cfg, this.logs))
    for (let i = 0; ; i++) {
      const ok = tryRun(
        'ssh',
        ['-F', this.lab.sshConfigPath, '-o', 'BatchMode=yes', '-o', 'ConnectTimeout=2', node.name, 'true'],
        undefined,
        5000,
      )
      if (ok.code === 0) return
      if (i >= 50) throw new Error(`the hostile sshd on ${node.name} did not start: ${this.logs.slice(-3).join(' | ')}`)
      await sleep(100)
    }
  }

  async restore(nodeName: string): Promise<void> {
    const node = NODES.find((n) => n.name === nodeName)!
    const mine = join(this.dir, `sshd-${node.key}.pid`)
    if (existsSync(mine)) tryRun('kill', [readFileSync(mine, 'utf8').trim()])
    for (let i = 0; i < 50 && existsSync(mine); i++) await sleep(100)
    await this.lab.restartSshd(nodeName, true)
  }

  stopAll(): void {
    for (const p of this.procs) p.kill('SIGKILL')
  }
}

/** A module run with `--import` in the doctor's process that writes its peak RSS (KiB) to `file` on exit. */
export function rssHook(dir: string, file: string): string {
  const hook = join(dir, 'rss-hook.mjs')
  writeFileSync(
    hook,
    `import {writeFileSync} from 'node:fs'\nprocess.on('exit', () => writeFileSync(${JSON.stringify(file)}, String(process.resourceUsage().maxRSS)))\n`,
  )
  return hook
}
