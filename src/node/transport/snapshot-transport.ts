import {
  commandWords,
  isNodeCommandKey,
  NODE_READS,
  notReadFile,
  readOf,
  recordedFile,
  type ArgsOf,
  type NodeCommandKey,
} from '../read/node-reads.js'
import {isReadableNodeFile} from '../node-commands.js'
import type {FileRead, NodeAccess, RunResult, TcpOpen, TransportDescription} from './node-access.js'
import {isNftJson, NODE_FILES, type NodeRecording} from '../read/node-files.js'
import {loadNodeRecording} from '../read/bundle.js'
import {notReadMark} from '../../parse/not-read-mark.js'

/** NodeAccess over a recording (a node's folder of a bundle): outputs by command key; what was not recorded says so. */
export class SnapshotNodeAccess implements NodeAccess {
  constructor(
    private readonly recording: NodeRecording,
    private readonly where: string,
  ) {}

  static fromFolder(dir: string): SnapshotNodeAccess {
    return new SnapshotNodeAccess(loadNodeRecording(dir) ?? new Map(), dir)
  }

  async run<K extends NodeCommandKey>(key: K, ...args: ArgsOf<K>): Promise<RunResult> {
    if (!isNodeCommandKey(key)) throw new Error(`"${String(key)}" is not an allow-listed node command`)
    const notRecorded = {kind: 'not-recorded', what: `${key} is not recorded in ${this.where}`} as const
    if (this.recording.has(NODE_FILES.error) || !readOf(key).transports.includes('snapshot')) return notRecorded
    if (key === 'nftKubeProxyTable') return this.ownNftTables(args[0] as ArgsOf<'nftKubeProxyTable'>[0])
    const file = recordedFile(key)
    const out = file ? this.recording.get(file) : undefined
    if (!out) return this.failedAgain(key) ?? notRecorded
    // Both nft forms land in one file: answer only for the form that was recorded.
    if ((key === 'nftRulesetJson' && !isNftJson(out)) || (key === 'nftRuleset' && isNftJson(out))) return notRecorded
    return {kind: 'ran', code: 0, stdout: out, stderr: ''}
  }

  /**
   * A read recorded as not made (its #kpd-not-read line, found by its command's words): it fails again as it did, so
   * that reading the snapshot again records the same line, never a read that was not recorded.
   */
  private failedAgain(key: NodeCommandKey): RunResult | undefined {
    const file = notReadFile(key)
    const words = commandWords(key)
    if (!file || words === undefined) return undefined
    for (const line of this.recording.get(file)?.toString('utf8').split('\n') ?? []) {
      const failed = notReadMark(line)
      if (failed?.command === words)
        return {kind: 'ran', code: failed.code, stdout: Buffer.alloc(0), stderr: `${failed.stderr}\n`}
    }
    return undefined
  }

  /**
   * kube-proxy's tables were recorded as one file for both families: the IPv4 question answers with all of it, the IPv6
   * one with nft's "no such table", so that reading them again gives the same ruleset.
   */
  private ownNftTables(a: ArgsOf<'nftKubeProxyTable'>[0]): RunResult {
    const out = this.recording.get(NODE_READS.nftKubeProxyTable.recorded.file)
    if (!out || (out.length > 0 && isNftJson(out) !== a.json))
      return {kind: 'not-recorded', what: `nft list table ${a.family} kube-proxy is not recorded in ${this.where}`}
    if (a.family === 'ip6' || out.length === 0)
      return {
        kind: 'ran',
        code: 1,
        stdout: Buffer.alloc(0),
        stderr: `Error: No such file or directory\nlist table ${a.family} kube-proxy\n`,
      }
    return {kind: 'ran', code: 0, stdout: out, stderr: ''}
  }

  async openTcp(host: string, port: number): Promise<TcpOpen> {
    return {kind: 'refused', outcome: 'not-probed', reason: `a snapshot cannot open connections (to ${host}:${port})`}
  }

  async readFile(path: string): Promise<FileRead> {
    if (!isReadableNodeFile(path)) throw new Error(`refusing to read "${path}" on a node: not an allow-listed file`)
    return {kind: 'not-recorded', what: `${path} is not recorded in ${this.where}`}
  }

  describe(): TransportDescription {
    return {transport: 'snapshot', address: this.where, tcpVia: 'nothing (a snapshot opens no connection)'}
  }

  close(): void {}
}
