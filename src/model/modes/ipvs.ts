import type {NodeObservation} from '../../node/observation.js'
import {parseIp} from '../../net/address.js'
import {IpsetState} from '../../parse/ipset-save.js'
import {IpvsTracer} from '../../trace/ipvs-tracer.js'
import {ipvsSetName} from '../chain-names.js'
import {IPVS_VOCABULARY, ipvsDataplane} from '../ipvs-dataplane.js'
import {readIpsetFile, readIptablesFile, readIpvsadmFile, walkError, withInputLines} from './dump-files.js'
import {familyLabel, type NodeFacts, type ProxyModeAdapter} from './mode.js'

const addressFamily = (facts?: NodeFacts) => (facts?.family === 'ip6' ? 6 : 4)
const glueDump = (obs: NodeObservation, facts?: NodeFacts) => (facts?.family === 'ip6' ? obs.ip6tables : obs.iptables)

/** IPVS mode's iptables glue: the KUBE-NODE-PORT chain, or the family's KUBE-CLUSTER-IP ipset match in KUBE-SERVICES. */
export function ipvsGlue(obs: NodeObservation, facts?: NodeFacts): boolean {
  const d = glueDump(obs, facts)
  const clusterIpSet = ipvsSetName('KUBE-CLUSTER-IP', addressFamily(facts))
  if (!d) return false
  if (d.hasChain('nat', 'KUBE-NODE-PORT')) return true
  // The chain is parsed first (a broken rule is refused here, as a walk of it would), then searched in its bytes: no
  // rule's text is looked at one by one (KUBE-SERVICES of a big cluster in iptables mode has tens of thousands).
  d.rules('nat', 'KUBE-SERVICES')
  return d.chainHolds('nat', 'KUBE-SERVICES', `--match-set ${clusterIpSet} `)
}

export const ipvsMode: ProxyModeAdapter<'ipvs'> = {
  mode: 'ipvs',
  recognise: (obs, facts) =>
    ipvsGlue(obs, facts) || ipvsGlue(obs)
      ? {reason: 'the rules on the node (KUBE-CLUSTER-IP ipset match)', conclusive: true}
      : undefined,
  // ipvsadm lists both families' virtual servers; each family's glue is its own dump (ip6tables-save for IPv6).
  readable: (obs, facts) => !!obs.ipvs && !!glueDump(obs, facts),
  notRead(facts, source) {
    const save = facts.family === 'ip6' ? 'ip6tables-save' : 'iptables-save'
    return {
      reason: `${familyLabel(facts)} rules not read (ipvsadm -Sn and ${save}, for IPVS mode: ${source})`,
      // The glue alone looks judged: said as a finding, once (the IPv4 run; an IPv6 run is a gap of that family).
      finding:
        facts.family === 'ip'
          ? {
              source: `${source}; but no ipvsadm output was read`,
              look: (address) => ({argv: ['ipvsadm', '-Ln'], sudo: true, filter: ['grep', '-A5', '--', address]}),
            }
          : undefined,
    }
  },
  vocabulary: IPVS_VOCABULARY,
  dataplane: (obs, facts) =>
    ipvsDataplane(glueDump(obs, facts)!, obs.ipvs!, facts.nodeAddress, obs.name, addressFamily(facts)),
  leftovers: () => undefined,
  fromFiles: {
    picks: 'ipvsadm',
    needs: [{file: 'iptables-save', why: 'IPVS nodes still run the iptables glue first'}],
    takes: ['ipset-save'],
    build(files, {localAddresses, dst}) {
      const glue = readIptablesFile(files['iptables-save']!, dst)
      let ipsets, servers
      try {
        ipsets = readIpsetFile(files['ipset-save'])
        servers = readIpvsadmFile(files.ipvsadm!)
      } catch (e) {
        glue.dump.close()
        throw e
      }
      // kube-proxy binds every virtual server address except the node's own (NodePorts) to kube-ipvs0.
      const vips = [...new Set(servers.map((v) => v.address).filter((a) => parseIp(a) && !localAddresses.includes(a)))]
      return {
        tracer: new IpvsTracer(glue.dump, servers, {localAddresses, vips, ipsets: ipsets ?? IpsetState.parse('')}),
        notes: glue.paste?.notes ?? [],
        inputLines: (result) => withInputLines(result, glue),
        walkError: (e) => walkError(e, glue.file, glue.paste),
        close: () => glue.dump.close(),
      }
    },
  },
}
