import type {ChildProcess} from 'node:child_process'
import {
  appendFileSync,
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {NODES} from '../fixtures/lab-cluster.js'
import {startSshdInNs, writeSshdConfig} from './lab-sshd.js'
import type {NetnsLab} from './netns-lab.js'
import {run, sleep, tryRun} from './sh.js'

/** The lab's non-root SSH user: its name (the one deploy/sudoers/kproxy-doctor names) and fixed ids. */
export const SUDO_USER = {name: 'kpd', uid: 4242, gid: 4242}

/**
 * Every lab node's sshd swapped for one that also lets `kpd`, a non-root user, log in with the lab's key, and whose
 * sudo reads a sudoers.d folder of the test's own. The user and the folder exist only in the mount namespace
 * `ip netns exec` gives that sshd (a slave of the host's): copies of /etc/passwd, /etc/group and /etc/shadow with
 * `kpd` added, and the test's folder, are bind-mounted over the real ones there before sshd starts. The host's files
 * are untouched and the host knows no `kpd`. Root still logs in (the same host keys), so one lab compares the two.
 * Every command a client sends is logged (as the lab's own sshd logs them) to a file `kpd` may write.
 */
export class SudoSshd {
  readonly dir = mkdtempSync(join(tmpdir(), 'kpd-sudo-'))
  readonly sudoersDir = join(this.dir, 'sudoers.d')
  readonly sshConfigPath = join(this.dir, 'ssh_config')
  readonly logs: string[] = []
  private readonly procs = new Map<string, ChildProcess>()
  private readonly home = join(this.dir, 'home-kpd')

  constructor(private readonly lab: NetnsLab) {
    // kpd reaches its home, the authorized keys and the command logger through this folder.
    chmodSync(this.dir, 0o755)
    mkdirSync(this.sudoersDir, {mode: 0o755})
    mkdirSync(this.home, {mode: 0o755})
    chownSync(this.home, SUDO_USER.uid, SUDO_USER.gid)
    copyFileSync(join(lab.dir, 'authorized_keys'), join(this.dir, 'authorized_keys'))
    chmodSync(join(this.dir, 'authorized_keys'), 0o644)
    this.writeAccounts()
    const logger = join(this.dir, 'log-command.sh')
    writeFileSync(
      logger,
      [
        '#!/bin/sh',
        `printf '%s\\n' "$SSH_ORIGINAL_COMMAND" >> ${this.dir}/commands-"$1".log`,
        'exec "${SHELL:-/bin/sh}" -c "$SSH_ORIGINAL_COMMAND"',
        '',
      ].join('\n'),
      {mode: 0o755},
    )
    for (const node of NODES) {
      const log = join(this.dir, `commands-${node.name}.log`)
      writeFileSync(log, '', {mode: 0o666})
      chmodSync(log, 0o666)
    }
    // The lab's ssh_config with the login changed: the same relays, key and known hosts.
    const config = readFileSync(lab.sshConfigPath, 'utf8')
    const asKpd = config.replace(/^ {2}User root$/gm, `  User ${SUDO_USER.name}`)
    if (asKpd.split(`User ${SUDO_USER.name}`).length !== NODES.length + 1)
      throw new Error(`the lab's ssh_config has no "User root" line per node:\n${config}`)
    writeFileSync(this.sshConfigPath, asKpd)
  }

  /** passwd, group and shadow as the host has them, `kpd` added (shadow `*`: no password, not locked for sshd). */
  private writeAccounts(): void {
    const {name, uid, gid} = SUDO_USER
    const add = (file: string, line: string, mode: number) => {
      const to = join(this.dir, file)
      writeFileSync(to, readFileSync(join('/etc', file), 'utf8').replace(/\n?$/, '\n') + line + '\n', {mode})
      chmodSync(to, mode)
      return to
    }
    add('passwd', `${name}:x:${uid}:${gid}:kproxy-doctor lab:${this.home}:/bin/sh`, 0o644)
    add('group', `${name}:x:${gid}:`, 0o644)
    add('shadow', `${name}:*:20000:0:99999:7:::`, 0o640)
  }

  /**
   * The sudoers.d folder sudo reads on every lab node: `text` as its one file (checked by `visudo -c` first, root's,
   * 0440 as sudo wants it), or nothing at all. Seen at once by the running sshds (the folder is bind-mounted).
   */
  setSudoers(text: string | undefined): void {
    const file = join(this.sudoersDir, 'kproxy-doctor')
    rmSync(file, {force: true})
    if (text === undefined) return
    const draft = join(this.dir, 'sudoers-draft')
    writeFileSync(draft, text, {mode: 0o440})
    run('visudo', ['-c', '-q', '-f', draft])
    copyFileSync(draft, file)
    chmodSync(file, 0o440)
    rmSync(draft)
  }

  /**
   * Replaces each lab node's sshd with this one (waits, bounded, until `kpd` logs in on it). `path`: the PATH sshd gives
   * a login (as Ubuntu's /etc/environment does through PAM); without it, sshd's own default, which for a user other than
   * root has no sbin folder on Debian (/usr/local/bin:/usr/bin:/bin:/usr/games).
   */
  async start(opts: {path?: string} = {}): Promise<void> {
    for (const node of NODES) {
      await this.stopLabSshd(node.key)
      await this.stop(node.name)
      for (const f of [`hostkey-${node.key}`, `hostkey-${node.key}.pub`])
        copyFileSync(join(this.lab.dir, f), join(this.dir, f))
      const cfg = writeSshdConfig(this.dir, node.key, {
        forwarding: true,
        forceCommand: `${join(this.dir, 'log-command.sh')} ${node.name}`,
      })
      if (opts.path) appendFileSync(cfg, `SetEnv PATH=${opts.path}\n`)
      // Before sshd: the lab's CNI cache (as the lab's own sshd has it), then the accounts and the sudoers folder.
      const mounts = [
        'mkdir -p /var/lib/cni/results && mount --bind "$1" /var/lib/cni/results',
        'mount --bind "$2" /etc/passwd',
        'mount --bind "$3" /etc/group',
        'mount --bind "$4" /etc/shadow',
        'mount --bind "$5" /etc/sudoers.d',
      ].join(' && ')
      const proc = startSshdInNs(this.lab.nodeNs(node), cfg, this.logs, {
        script: `${mounts} || exit 1`,
        args: [
          this.lab.cniResultsDir(node),
          ...['passwd', 'group', 'shadow'].map((f) => join(this.dir, f)),
          this.sudoersDir,
        ],
      })
      this.procs.set(node.name, proc)
      await this.untilLogin(node.name)
    }
  }

  /** Stops every sshd this started (by its id) and gives each node back the lab's own sshd. */
  async restore(): Promise<void> {
    for (const node of NODES) {
      await this.stop(node.name)
      await this.lab.restartSshd(node.name, true)
    }
  }

  /** The commands node `nodeName`'s sshd was asked to run (as root or `kpd`), one per line, in arrival order. */
  commandLog(nodeName: string): string[] {
    const file = join(this.dir, `commands-${nodeName}.log`)
    return existsSync(file) ? readFileSync(file, 'utf8').split('\n').slice(0, -1) : []
  }

  clearCommandLogs(): void {
    for (const node of NODES) writeFileSync(join(this.dir, `commands-${node.name}.log`), '')
  }

  /** Kills every sshd this started (by its id) and removes the folder. */
  down(): void {
    for (const p of this.procs.values()) p.kill('SIGKILL')
    rmSync(this.dir, {recursive: true, force: true})
  }

  private async stop(nodeName: string): Promise<void> {
    const proc = this.procs.get(nodeName)
    this.procs.delete(nodeName)
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return
    const exited = new Promise((done) => proc.once('exit', done))
    proc.kill('SIGKILL')
    await Promise.race([exited, sleep(5000)])
  }

  private async stopLabSshd(key: string): Promise<void> {
    const pidFile = join(this.lab.dir, `sshd-${key}.pid`)
    if (!existsSync(pidFile)) return
    tryRun('kill', [readFileSync(pidFile, 'utf8').trim()])
    for (let i = 0; i < 50 && existsSync(pidFile); i++) await sleep(100)
  }

  private async untilLogin(nodeName: string): Promise<void> {
    for (let i = 0; ; i++) {
      const r = tryRun(
        'ssh',
        ['-F', this.sshConfigPath, '-o', 'BatchMode=yes', '-o', 'ConnectTimeout=2', nodeName, 'id -un'],
        undefined,
        5000,
      )
      if (r.code === 0 && r.stdout.trim() === SUDO_USER.name) return
      if (i >= 50)
        throw new Error(`kpd cannot log in on ${nodeName}: ${r.stderr.trim()} | ${this.logs.slice(-3).join(' | ')}`)
      await sleep(100)
    }
  }
}
