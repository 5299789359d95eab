import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import type {Packet} from '../../src/trace/types.js'

/** The node's own address in walks over a made-up nat table. */
export const NAT_NODE = '192.168.1.10'

/** A pod's packet to a ClusterIP, as the made-up nat tables below expect it. */
export const POD_TO_CLUSTER_IP: Packet = {
  src: '10.244.1.5',
  dst: '10.96.0.10',
  proto: 'tcp',
  dport: 80,
  sport: 40000,
  inIface: 'cni0',
  outIface: 'eth0',
}

/** A nat table of the built-in chains plus `chains`, holding `rules` (iptables-save lines), parsed. */
export function natDump(chains: string[], rules: string[]): IptablesSave {
  const text = [
    '*nat',
    ':PREROUTING ACCEPT [0:0]',
    ':INPUT ACCEPT [0:0]',
    ':OUTPUT ACCEPT [0:0]',
    ':POSTROUTING ACCEPT [0:0]',
    ...chains.map((c) => `:${c} - [0:0]`),
    ...rules,
    'COMMIT',
    '',
  ].join('\n')
  return IptablesSave.parse(new BufferSource(Buffer.from(text)))
}
