/**
 * Command lines on the bundled broken example that several tests run: node-b's dump, a packet from a pod on node-b to
 * the Service's ClusterIP (shop/web, 10.96.10.10:80).
 */
export const BROKEN_EXAMPLE_TRACE = [
  'trace',
  '--iptables-save',
  'examples/broken-cluster/nodes/node-b/iptables-save.txt',
  '--src',
  '10.244.2.100',
  '--dst',
  '10.96.10.10',
  '--dport',
  '80',
] as const
