import type {NodeObservation} from '../../node/observation.js'
import {acceptsUnknown, ipvsGlueWithoutIpvsadm} from '../../trace/iptables-fragment.js'
import {IptablesTracer} from '../../trace/iptables-tracer.js'
import {IPTABLES_VOCABULARY, iptablesDataplane} from '../iptables-dataplane.js'
import {readIpsetFile, readIptablesFile, walkError, withInputLines} from './dump-files.js'
import {ipvsGlue} from './ipvs.js'
import {familyLabel, type NodeFacts, type ProxyModeAdapter} from './mode.js'

/** The family's rules: iptables-save for IPv4, ip6tables-save for IPv6. */
const familyDump = (obs: NodeObservation, facts: NodeFacts) => (facts.family === 'ip6' ? obs.ip6tables : obs.iptables)
const hasServicesChain = (obs: NodeObservation, facts: NodeFacts) =>
  !!familyDump(obs, facts)?.hasChain('nat', 'KUBE-SERVICES')

export const iptablesMode: ProxyModeAdapter<'iptables'> = {
  mode: 'iptables',
  recognise: (obs, facts) =>
    hasServicesChain(obs, facts) && !ipvsGlue(obs, facts) ? {reason: 'the rules on the node'} : undefined,
  readable: (obs, facts) => !!familyDump(obs, facts),
  notRead: (facts) => ({
    reason: `${familyLabel(facts)} rules not read (${facts.family === 'ip6' ? 'ip6tables-save' : 'iptables-save'})`,
  }),
  vocabulary: IPTABLES_VOCABULARY,
  dataplane: (obs, facts) => iptablesDataplane(familyDump(obs, facts)!, facts.family),
  leftovers(obs, facts, running) {
    const tool = facts.family === 'ip6' ? 'ip6tables' : 'iptables'
    if (running === 'ipvs')
      return familyDump(obs, facts)
        ?.chainNames('nat')
        .some((c) => c.startsWith('KUBE-SVC-'))
        ? `KUBE-SVC-* chains from iptables mode (${tool})`
        : undefined
    return hasServicesChain(obs, facts)
      ? `${tool} chains nat KUBE-SERVICES (and its KUBE-SVC/KUBE-SEP chains) from iptables mode`
      : undefined
  },
  fromFiles: {
    picks: 'iptables-save',
    takes: ['ipset-save'],
    build(files, {localAddresses, dst}) {
      const rules = readIptablesFile(files['iptables-save']!, dst)
      let ipsets
      try {
        ipsets = readIpsetFile(files['ipset-save'])
      } catch (e) {
        rules.dump.close()
        throw e
      }
      const ipvs = ipvsGlueWithoutIpvsadm(rules.dump)
      return {
        tracer: new IptablesTracer(rules.dump, {localAddresses, ipsets}),
        notes: rules.paste?.notes ?? [],
        // An IPVS node's glue walked without its ipvsadm output: the rules' ACCEPT is not where the packet goes.
        inputLines: (result) => withInputLines(ipvs ? acceptsUnknown(result, ipvs) : result, rules),
        walkError: (e) => walkError(e, rules.file, rules.paste),
        close: () => rules.dump.close(),
      }
    },
  },
}
