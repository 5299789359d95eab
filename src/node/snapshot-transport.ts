import {isNodeCommandKey, isReadableNodeFile, type ArgsOf, type NodeCommand, type NodeCommandKey} from './node-commands.js'
import type {FileRead, NodeAccess, RunResult, TcpOpen, TransportDescription} from './node-access.js'
import {loadNodeRecording, NODE_FILES, RECORDED_AS, type NodeRecording} from './bundle.js'

const looksLikeJson = (b: Buffer) => b.toString('utf8', 0, Math.min(b.length, 64)).trimStart().startsWith('{')

/** NodeAccess over a recording (a node's folder of a bundle): outputs by command key; what was not recorded says so. */
export class SnapshotNodeAccess implements NodeAccess {
  constructor(
    private readonly recording: NodeRecording,
    private readonly where: string,
  ) {}

  static fromFolder(dir: string): SnapshotNodeAccess {
    return new SnapshotNodeAccess(loadNodeRecording(dir) ?? new Map(), dir)
  }

  async run<K extends NodeCommandKey>(key: K, ..._args: ArgsOf<K>): Promise<RunResult> {
    if (!isNodeCommandKey(key)) throw new Error(`"${String(key)}" is not an allow-listed node command`)
    const notRecorded = {kind: 'not-recorded', what: `${key} is not recorded in ${this.where}`} as const
    if (this.recording.has(NODE_FILES.error)) return notRecorded
    const file = RECORDED_AS[key as NodeCommand]
    const out = file ? this.recording.get(file) : undefined
    if (!out) return notRecorded
    // Both nft forms land in one file: answer only for the form that was recorded.
    if ((key === 'nftRulesetJson' && !looksLikeJson(out)) || (key === 'nftRuleset' && looksLikeJson(out))) return notRecorded
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
