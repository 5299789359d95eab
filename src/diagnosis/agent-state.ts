import type {KubeConfig} from '@kubernetes/client-node'
import type {ClusterState} from '../cluster/types.js'
import {decideImplementer, SERVICE_IMPLEMENTERS} from '../model/implementers/index.js'
import type {NodeCollection} from '../node/read/collect-node.js'
import {NODE_FILES, type NodeRecording} from '../node/read/node-files.js'
import {recordedFile} from '../node/read/node-reads.js'
import {parseNodeRecording} from '../node/read/recording.js'
import type {AgentAnswer, AgentRead} from '../node/transport/pod/agent-reads.js'

/** Reads one node's agent (see node/transport/pod/agent-reads.ts). */
type ReadAgent = (node: string, agent: AgentRead) => Promise<AgentAnswer>

/**
 * After a node is read: where the implementer decided for it has an agent to read (Cilium's), its Service state is read
 * in the agent's Pod on that node and kept in the node's recording, as a bundle keeps it (or why it could not be read),
 * so that `svc`, `scan` and a replay of `collect`'s bundle judge the same thing. Other nodes pass as they are.
 */
export function agentStateReader(
  cluster: ClusterState,
  kubeConfig: () => KubeConfig,
  timeoutMs: number,
  log?: (line: string) => void,
): (name: string, collection: NodeCollection) => Promise<NodeCollection> {
  let reader: Promise<ReadAgent> | undefined
  return async (name, collection) => {
    if (!collection.observation.reachable) return collection
    const decided = decideImplementer(cluster, name, collection.observation)
    const adapter = SERVICE_IMPLEMENTERS.find((i) => i.name === decided.name)
    const agent = adapter?.agent
    if (!adapter || !agent) return collection
    reader ??= import('../node/transport/pod/agent-reads.js').then((m) => m.agentReader(kubeConfig(), timeoutMs))
    const labels = adapter.reads.agentLabels[0] ?? {}
    const answer = await (
      await reader
    )(name, {
      title: `${adapter.title}'s agent`,
      namespaces: adapter.reads.namespaces,
      labelSelector: Object.entries(labels)
        .map(([k, v]) => `${k}=${v}`)
        .join(','),
      container: agent.container,
      reads: agent.reads,
    })
    const recording: NodeRecording = new Map(collection.recording)
    if (answer.kind === 'read') {
      log?.(`${name}: ${answer.argv.join(' ')} read in ${adapter.title}'s agent Pod ${answer.pod}`)
      recording.set(recordedFile(agent.reads[0])!, answer.stdout)
    } else {
      log?.(`${name}: ${adapter.title}'s Service state not read: ${answer.reason}`)
      recording.set(NODE_FILES.agentNotRead, Buffer.from(`${answer.reason}\n`))
    }
    return {recording, observation: parseNodeRecording(name, recording)}
  }
}
