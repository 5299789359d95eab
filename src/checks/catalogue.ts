import {PROXY_MODE_NAMES, type ProxyMode} from '../model/modes/index.js'
import type {Step} from '../model/steps.js'

/** What a CI reader groups findings by: from the Service's own objects to the packet path. */
type CheckFamily = 'service' | 'endpoints' | 'dns' | 'kube-proxy' | 'rules' | 'hairpin' | 'path' | 'policy'

/**
 * One row of the finding-code catalogue: the single source of each code's severity, words and reach. Checks take
 * their metadata from here, the README's code table is generated from it, and the step a path breaks at names the
 * codes that can explain it.
 */
export interface CodeEntry {
  /** Stable, greppable, silenceable: KPD-AREA-WHAT. */
  code: string
  severity: 'error' | 'warning' | 'info'
  family: CheckFamily
  title: string
  /** The generic next step; a finding may carry a more precise one. */
  hint: string
  /**
   * The path steps a break at which this code's finding explains (the report takes its next step from it): always, or
   * only where a condition of the path holds (`when`, decided by checks/break-explained.ts for KPD-PATH-BROKEN's
   * silence and for the breaks an ignore rule silences alike).
   */
  explains: readonly Explanation[]
  /** The proxy modes whose nodes can have it. */
  modes: readonly ProxyMode[]
}

/** A step a code's finding explains a break at, unconditionally or on a condition of the broken path. */
export type Explanation = Step | {step: Step; when: BreakCondition}

/** Conditions on a broken path, in words (docs/checks.md); checks/break-explained.ts decides each. */
export const BREAK_CONDITIONS = {
  'policy-drops-agree':
    "where every drop on the node the path breaks on is a policy engine's rule the API's NetworkPolicies agree with",
} as const
export type BreakCondition = keyof typeof BREAK_CONDITIONS

const ALL_MODES = PROXY_MODE_NAMES

export const CATALOGUE: readonly CodeEntry[] = [
  {
    code: 'KPD-NOT-PROXIED',
    severity: 'info',
    family: 'service',
    title: 'kube-proxy programs no rules for this Service by design',
    hint: 'Nothing to fix in kube-proxy: check DNS and the Pods instead.',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-SELECTOR-NO-PODS',
    severity: 'error',
    family: 'endpoints',
    title: "The Service's selector matches no Pod",
    hint: "Fix the selector or the Pods' labels so that they agree.",
    explains: ['endpoints'],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-NO-READY-ENDPOINTS',
    severity: 'error',
    family: 'endpoints',
    title: 'The Service has no ready endpoints',
    hint: 'Fix the Pods first: their events, readiness probes and the logs of their previous runs.',
    explains: ['endpoints'],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-TARGETPORT-NOT-EXPOSED',
    severity: 'error',
    family: 'endpoints',
    title: 'Named targetPort not defined by the selected Pods',
    hint: "Name the containerPort in the Pod template as the Service's targetPort says, or use the port number.",
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-TARGETPORT-UNDECLARED',
    severity: 'warning',
    family: 'endpoints',
    title: 'Numeric targetPort is not among the ports the Pods declare',
    hint: 'If the container listens elsewhere, fix targetPort; if it listens there without declaring it, declare the containerPort.',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-ENDPOINT-NOT-READY',
    severity: 'warning',
    family: 'endpoints',
    title: 'Some endpoints are not ready and get no traffic',
    hint: "Look at the Pod's readiness probe, events and last termination.",
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-DNS-SERVICE-MISSING',
    severity: 'error',
    family: 'dns',
    title: 'Cluster DNS Service not found',
    hint: 'Look for the cluster DNS Service in kube-system (label k8s-app=kube-dns); redeploy CoreDNS if it is gone.',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-DNS-NO-ENDPOINTS',
    severity: 'error',
    family: 'dns',
    title: 'Cluster DNS has no ready endpoints',
    hint: 'Look at the CoreDNS Pods in kube-system (label k8s-app=kube-dns): their events and logs.',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-NODE-UNREADABLE',
    severity: 'warning',
    family: 'kube-proxy',
    title: 'Node could not be read',
    hint: 'Check SSH access to the node (ssh NODE true) and --ssh-config; the other nodes are still diagnosed.',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-NO-IMPLEMENTER',
    severity: 'error',
    family: 'kube-proxy',
    title: 'Nothing implements Services on this node',
    hint: "Neither kube-proxy nor a replacement (Cilium, Calico eBPF, kube-router, Antrea, OVN-Kubernetes) runs on the node: deploy kube-proxy there, or enable your CNI's Service implementation.",
    explains: ['entry', 'service-match'],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-TWO-IMPLEMENTERS',
    severity: 'warning',
    family: 'kube-proxy',
    title: 'Two implementers of Services are active on this node',
    hint: "kube-proxy's rules and a replacement both program the Service addresses and fight over them: remove kube-proxy (and its rules: kube-proxy --cleanup) or turn the replacement off.",
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-CILIUM-FRONTEND-MISSING',
    severity: 'error',
    family: 'rules',
    title: "Cilium's agent on this node has no frontend for the Service's ClusterIP or NodePort",
    hint: 'The agent has not programmed the Service: read its log (kubectl logs on the agent Pod) for errors syncing Services, then restart the agent Pod.',
    explains: [],
    modes: [],
  },
  {
    code: 'KPD-CILIUM-BACKEND-MISSING',
    severity: 'error',
    family: 'rules',
    title: "Cilium's agent on this node lacks a ready endpoint of the EndpointSlices",
    hint: "The agent missed an EndpointSlice update: compare cilium-dbg service list with the slices, read the agent's log, then restart the agent Pod.",
    explains: [],
    modes: [],
  },
  {
    code: 'KPD-CILIUM-BACKEND-STALE',
    severity: 'error',
    family: 'rules',
    title: "Cilium's agent on this node still sends traffic to a backend in no EndpointSlice",
    hint: 'The agent kept a backend after its EndpointSlice dropped it: restart the agent Pod on the node (it rebuilds its load-balancing maps from the slices).',
    explains: [],
    modes: [],
  },
  {
    code: 'KPD-CILIUM-BACKEND-NOT-READY-ACTIVE',
    severity: 'warning',
    family: 'rules',
    title: "Cilium's agent on this node keeps a backend active whose endpoint is not ready",
    hint: "New connections still go to a Pod the EndpointSlice marks not ready: read the agent's log for EndpointSlice errors, then restart the agent Pod.",
    explains: [],
    modes: [],
  },
  {
    code: 'KPD-CILIUM-NODE-DIVERGES',
    severity: 'warning',
    family: 'rules',
    title: "Cilium's agent on this node has a different backend set than the agents on the other nodes",
    hint: 'An agent that missed updates (often after a restart): compare cilium-dbg service list on this node and a healthy one, then restart the agent Pod here.',
    explains: [],
    modes: [],
  },
  {
    code: 'KPD-MODE-MIXED',
    severity: 'warning',
    family: 'kube-proxy',
    title: 'Nodes run kube-proxy in different modes',
    hint: 'Give every node the same kube-proxy configuration (mode) and restart the odd ones.',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-MODE-UNSUPPORTED',
    severity: 'warning',
    family: 'kube-proxy',
    title: "The node's proxy mode is known but part of its state was not read: its rules are not judged",
    hint: 'Read the node another way (--via) or install the missing tool there (ipvsadm for IPVS); meanwhile check it by hand: ipvsadm -Ln -t CLUSTER-IP:PORT lists a real server per ready endpoint.',
    explains: [],
    modes: ['ipvs'],
  },
  {
    code: 'KPD-MODE-MISMATCH',
    severity: 'warning',
    family: 'kube-proxy',
    title: "A node's rules are of another mode than kube-proxy's configuration says",
    hint: 'kube-proxy on the node was not restarted after the mode changed, or runs with its own flags: check its command line and restart it.',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-MODE-LEFTOVER',
    severity: 'warning',
    family: 'kube-proxy',
    title: 'Rules of a proxy mode not in use are left on the node',
    hint: 'Stale rules of another mode can still rewrite packets: run `kube-proxy --cleanup` for the old mode (or reboot the node) during a maintenance window.',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-PROXY-POD-DOWN',
    severity: 'error',
    family: 'kube-proxy',
    title: "The node's kube-proxy Pod is not running and ready",
    hint: "Look at the kube-proxy Pod's events and at the logs of its previous run.",
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-PROXY-UNHEALTHY',
    severity: 'error',
    family: 'kube-proxy',
    title: 'kube-proxy reports itself unhealthy (/healthz)',
    hint: 'kube-proxy has not synced rules for too long, or the node is being deleted: read the logs of its Pod in kube-system and restart it.',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-PROXY-STUCK',
    severity: 'error',
    family: 'kube-proxy',
    title: 'kube-proxy queued a sync long after its last successful one: it is stuck',
    hint: 'Restart kube-proxy on the node and read why its syncs fail (iptables-restore / nft errors in its log).',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-PROXY-SYNC-FAILURES',
    severity: 'warning',
    family: 'kube-proxy',
    title: 'kube-proxy has failed to write its rules',
    hint: "Read kube-proxy's log for the failing iptables-restore / nft call (another program may hold the lock or have changed the tables).",
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-HOOK-MISSING',
    severity: 'error',
    family: 'rules',
    title: "kube-proxy's chains are missing or not hooked into the nat table",
    hint: 'Is kube-proxy running on the node, in the mode it was judged in? Check its logs and restart it: it re-creates the jumps on its next sync.',
    explains: ['entry', 'service-match', 'masquerade'],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-SVC-RULE-MISSING',
    severity: 'error',
    family: 'rules',
    title: "Service port missing from the node's rules that match Service addresses",
    hint: 'kube-proxy on this node has not synced the Service: check its logs and sync metrics, then restart it.',
    explains: ['service-match'],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-REJECT-STALE',
    severity: 'error',
    family: 'rules',
    title: 'A "no endpoints" REJECT/DROP rule is still present although the Service has endpoints',
    hint: 'kube-proxy on this node did not pick up the endpoints: restart it and check its logs.',
    explains: ['service-match', 'nodeport-match', 'filter'],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-NODEPORT-MISSING',
    severity: 'error',
    family: 'rules',
    title: 'NodePort not programmed on the node',
    hint: 'kube-proxy on this node has not synced the NodePort: check its logs and nodePortAddresses, then restart it.',
    explains: ['nodeport-match', 'external-policy'],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-SEP-MISSING',
    severity: 'error',
    family: 'rules',
    title: 'Ready endpoint missing from the service chain',
    hint: 'kube-proxy on this node missed an endpoint update: look for errors in the logs of its Pod in kube-system and restart it.',
    explains: ['service', 'endpoint'],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-SEP-STALE',
    severity: 'error',
    family: 'rules',
    title: 'Stale endpoint in the service chain',
    hint: 'kube-proxy on this node still sends traffic to an address that is no endpoint: restart it and check why it stopped syncing.',
    explains: ['DNAT'],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-DNAT-WRONG',
    severity: 'error',
    family: 'rules',
    title: 'DNAT to the wrong address or port',
    hint: "Compare the Service targetPort with the Pods' containerPort; if the Service is right, kube-proxy on this node is stale: restart it.",
    explains: ['DNAT'],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-PROBABILITY-WRONG',
    severity: 'warning',
    family: 'rules',
    title: 'Endpoint probabilities do not split traffic evenly',
    hint: 'Rules edited by hand or a stale sync: restart kube-proxy on the node.',
    explains: [],
    modes: ['iptables'],
  },
  {
    code: 'KPD-AFFINITY-MISMATCH',
    severity: 'warning',
    family: 'rules',
    title: "Session affinity on the node differs from the Service's sessionAffinity",
    hint: 'Clients do not stick to one backend (or stick when they should not): restart kube-proxy on the node so it rewrites the chain.',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-IPVS-WEIGHT-ZERO',
    severity: 'error',
    family: 'rules',
    title: 'IPVS real server stuck at weight 0 for a ready endpoint',
    hint: 'kube-proxy sets weight 0 only for terminating endpoints; a ready one at 0 gets no traffic (kubernetes #92019): restart kube-proxy on the node.',
    explains: ['service'],
    modes: ['ipvs'],
  },
  {
    code: 'KPD-IPVS-VIP-UNBOUND',
    severity: 'error',
    family: 'rules',
    title: 'Service address not bound to kube-ipvs0',
    hint: 'Without the address on kube-ipvs0 the packet is not delivered locally to IPVS: restart kube-proxy on the node.',
    explains: ['service-match'],
    modes: ['ipvs'],
  },
  {
    code: 'KPD-IPVS-IPSET-MISSING',
    severity: 'error',
    family: 'rules',
    title: "An ipset entry IPVS mode's iptables rules depend on is missing",
    hint: 'kube-proxy keeps these sets in step with the Services; a missing entry means a stale or failing kube-proxy: restart it.',
    explains: ['service-match', 'masquerade'],
    modes: ['ipvs'],
  },
  {
    code: 'KPD-IPVS-SYSCTL',
    severity: 'error',
    family: 'rules',
    title: 'A sysctl IPVS mode needs is not set',
    hint: 'kube-proxy sets these at start: something reset them (a tuning daemon, a sysctl.d file). Set them back and find what changed them.',
    explains: ['masquerade'],
    modes: ['ipvs'],
  },
  {
    code: 'KPD-IPVS-SCHEDULER',
    severity: 'warning',
    family: 'rules',
    title: 'Virtual server scheduler or persistence differs from what kube-proxy and the Service ask',
    hint: "Compare kube-proxy's ipvs.scheduler and the Service's sessionAffinity with `ipvsadm -Ln`; restart kube-proxy on the node.",
    explains: [],
    modes: ['ipvs'],
  },
  {
    code: 'KPD-MASQ-MISSING',
    severity: 'error',
    family: 'rules',
    title: 'Masquerade mark or MASQUERADE rule missing',
    hint: 'Without it, NodePort/external traffic to other nodes and hairpin traffic lose their replies. Restart kube-proxy; check masqueradeBit in its config.',
    explains: ['masquerade'],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-HAIRPIN-OFF',
    severity: 'error',
    family: 'hairpin',
    title: "Hairpin is off on a backend Pod's bridge port",
    hint: 'Run the kubelet with --hairpin-mode=hairpin-veth (or promiscuous-bridge), or set it on the port: bridge link set dev PORT hairpin on',
    explains: ['bridge/hairpin'],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-HAIRPIN-UNMAPPED',
    severity: 'warning',
    family: 'hairpin',
    title: 'Bridge ports with hairpin off on a node hosting backends; which pod is behind them is unknown',
    hint: "Find the pod behind each port (the CNI result cache in /var/lib/cni/results, as root; else ip neigh and bridge fdb) and check the kubelet's --hairpin-mode.",
    explains: ['bridge/hairpin'],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-PATH-UNDECIDED',
    severity: 'warning',
    family: 'path',
    title: 'A rule on the path could not be evaluated',
    hint: 'The tracer never guesses: read the rule named and decide by hand; report it so the tracer learns it.',
    explains: ['unknown'],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-NODE-DIVERGES',
    severity: 'warning',
    family: 'kube-proxy',
    title: 'This node programs a different endpoint set than the other nodes',
    hint: 'A stuck or crashed kube-proxy on this node: compare its logs and sync metrics with a healthy node, then restart it.',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-DNS-NO-ANSWER',
    severity: 'error',
    family: 'dns',
    title: "The Service's name does not resolve to its ClusterIP through cluster DNS",
    hint: 'Check the DNS Pods and their logs; from a pod: nslookup NAME.NAMESPACE.svc.cluster.local',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-PATH-BROKEN',
    severity: 'error',
    family: 'path',
    title: 'The packet path breaks at a rule no other finding explains (often a CNI, firewall or NetworkPolicy rule)',
    hint: 'Read the rule named in the evidence; `kproxy-doctor svc … --explain` or `kproxy-doctor trace` shows the whole walk.',
    explains: ['filter'],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-FILTER-DROP',
    severity: 'error',
    family: 'path',
    title:
      "A chain kube-proxy does not own (Docker's, a CNI's, a policy engine's, a hand-written one) or a built-in chain's DROP policy drops the Service's traffic",
    hint: 'Read the chain named in the message with the command given; find out who added the rule (or set the policy) before changing it.',
    explains: ['filter'],
    modes: ['iptables', 'nftables'],
  },
  {
    code: 'KPD-BACKEND-REFUSED',
    severity: 'error',
    family: 'endpoints',
    title: 'A ready endpoint does not accept connections on its port from any node (live probe)',
    hint: "The Pod is Ready but does not serve its targetPort: check what it listens on and what its readiness probe checks (the Pod's spec).",
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-ENDPOINT-CROSS-NODE',
    severity: 'warning',
    family: 'path',
    title:
      'An endpoint answers from its own node but not from another, and neither node shows why (live probe; no node blamed)',
    hint: "The path between the two nodes breaks where nothing read shows: on the probing node its route to the pod network (ip route get with the pod's address); on the endpoint's node filter FORWARD and the pod's bridge port; a firewall between them.",
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-VIP-FAILS',
    severity: 'error',
    family: 'path',
    title: 'A Service address fails from a node while its endpoints answer from that node (live probe)',
    hint: 'The rules read say it works: look at conntrack entries for the address (conntrack -L -d ADDRESS) and run the diagnosis again (kube-proxy may have rewritten the rules).',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-PROBE-CONTRADICTS',
    severity: 'error',
    family: 'path',
    title: 'A live probe contradicts the static diagnosis',
    hint: "Run the diagnosis again; if it persists, compare the node's rules with the walk (kproxy-doctor svc … --explain) and report the rule the tracer misreads.",
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-KERNEL-DISAGREES',
    severity: 'error',
    family: 'path',
    title: "The kernel's conntrack entries of the live probes contradict the walk",
    hint: "Run the diagnosis again; if it persists, compare the node's rules with the walk (kproxy-doctor svc … --explain) and the kernel's conntrack entries, and report the rule the tracer misreads.",
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-NODE-FORWARDING-OFF',
    severity: 'error',
    family: 'path',
    title: 'IP forwarding is off on a node (net.ipv4.ip_forward = 0)',
    hint: 'Turn it on (sysctl -w net.ipv4.ip_forward=1) and find what turned it off: a sysctl.d file, a hardening script, a CNI or a container runtime restart.',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-ROUTE-LOCALNET-OFF',
    severity: 'warning',
    family: 'path',
    title: 'NodePorts on 127.0.0.1 fail on a node: route_localnet is off',
    hint: 'Set net.ipv4.conf.all.route_localnet=1 (kube-proxy sets it at start when localhost NodePorts are on) and find what reset it; or turn localhost NodePorts off in kube-proxy (iptables.localhostNodePorts: false).',
    explains: [],
    modes: ['iptables'],
  },
  {
    code: 'KPD-BRIDGE-NF-OFF',
    severity: 'error',
    family: 'path',
    title: 'Bridged traffic skips netfilter on a node (bridge-nf-call-iptables = 0, or br_netfilter not loaded)',
    hint: 'Load br_netfilter (modprobe br_netfilter) and set net.bridge.bridge-nf-call-iptables=1, as kubeadm requires; persist both in /etc/modules-load.d and /etc/sysctl.d.',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-ROUTE-MISSING',
    severity: 'error',
    family: 'path',
    title: "A node has no working route to another node's pod CIDR",
    hint: "The CNI's route controller (or the cloud's route table) should route each node's pod CIDR to that node: check the CNI's agent on both nodes.",
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-CONNTRACK-STALE',
    severity: 'error',
    family: 'path',
    title: "Conntrack entries still send the Service's traffic to an address that is no endpoint",
    hint: 'Delete the stale entries with the fix shown (conntrack -D with the exact tuple); kube-proxy normally clears UDP entries when an endpoint goes away.',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-CONNTRACK-FULL',
    severity: 'warning',
    family: 'path',
    title: "A node's conntrack table is nearly full: new connections are dropped when it is",
    hint: 'Raise net.netfilter.nf_conntrack_max (or kube-proxy --conntrack-max-per-core), or find what opens so many connections (conntrack -S, conntrack -L).',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-POLICY-DENIES',
    severity: 'error',
    family: 'policy',
    title: "A NetworkPolicy selecting the Service's endpoints allows nothing from this client on the targetPort",
    hint: "Add an ingress rule for the client (its namespace and labels, or its node's address) on the targetPort, the port the policy sees after the Service's DNAT.",
    explains: [{step: 'filter', when: 'policy-drops-agree'}],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-POLICY-SERVICE-PORT',
    severity: 'error',
    family: 'policy',
    title: "A NetworkPolicy allows the Service's port, not the targetPort it sees after DNAT",
    hint: 'Policies judge the packet after kube-proxy translated it to the endpoint: write the targetPort (or its name) in the rule, not the Service port.',
    explains: [{step: 'filter', when: 'policy-drops-agree'}],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-POLICY-EGRESS-DENIES',
    severity: 'error',
    family: 'policy',
    title: "The client's egress NetworkPolicy allows nothing to the Service's endpoints",
    hint: "Add an egress rule to the endpoint Pods (their namespace and labels) on the targetPort: egress is judged after DNAT, on the endpoint's address, not the ClusterIP.",
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-POLICY-DNS-EGRESS',
    severity: 'warning',
    family: 'policy',
    title: "The client's egress NetworkPolicy allows no DNS to the cluster DNS Pods: names do not resolve",
    hint: 'Add an egress rule to the cluster DNS Pods (kube-system, k8s-app=kube-dns) on UDP and TCP 53.',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-POLICY-DATAPLANE-DISAGREES',
    severity: 'error',
    family: 'policy',
    title:
      "A policy engine's rules on a node drop traffic the API's NetworkPolicies allow, or enforce a policy the API does not have",
    hint: "Read the engine's agent logs on that node; its rules are out of step with the API server's policies (restarting the agent rebuilds them).",
    explains: ['filter'],
    modes: ['iptables', 'nftables'],
  },
  {
    code: 'KPD-ANP-DENIES',
    severity: 'error',
    family: 'policy',
    title:
      "An AdminNetworkPolicy's Deny rule drops the client's connections to the endpoints, before any NetworkPolicy",
    hint: 'No NetworkPolicy can allow what an AdminNetworkPolicy denies: the cluster administrators narrow the Deny rule, or put a Pass (NetworkPolicies decide) or Allow rule for this client before it.',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-BANP-DENIES',
    severity: 'error',
    family: 'policy',
    title: 'The BaselineAdminNetworkPolicy denies the connection and no NetworkPolicy selects the Pods',
    hint: 'Add a NetworkPolicy allowing it (it then decides instead of the baseline), or change the BaselineAdminNetworkPolicy default.',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-ANP-SAME-PRIORITY',
    severity: 'warning',
    family: 'policy',
    title: 'AdminNetworkPolicies of one priority decide the same connection differently: which applies is undefined',
    hint: 'Give them different priorities (a lower number is judged first).',
    explains: [],
    modes: ALL_MODES,
  },
  {
    code: 'KPD-ANP-ALLOWS',
    severity: 'info',
    family: 'policy',
    title: "An AdminNetworkPolicy's Allow rule lets through connections the NetworkPolicies or the baseline would deny",
    hint: 'An AdminNetworkPolicy Allow is final: NetworkPolicies are not consulted. To let them decide, its action is Pass.',
    explains: [],
    modes: ALL_MODES,
  },
]

const BY_CODE = new Map(CATALOGUE.map((e) => [e.code, e]))

/** The catalogue row of a code; a code missing from the catalogue is a programming error. */
export function codeEntry(code: string): CodeEntry {
  const entry = BY_CODE.get(code)
  if (!entry) throw new Error(`finding code ${code} is not in the catalogue`)
  return entry
}

export function isKnownCode(code: string): boolean {
  return BY_CODE.has(code)
}

/** The step of an explanation. */
export function explainedStep(x: Explanation): Step {
  return typeof x === 'string' ? x : x.step
}

/**
 * The codes whose findings can explain a path that breaks at `step` (some only on a condition of the walk), for the
 * report, which names a break's finding without the walks at hand; the checks decide with `explainsBreak`
 * (checks/break-explained.ts).
 */
export function codesExplaining(step: Step): string[] {
  return CATALOGUE.filter((e) => e.explains.some((x) => explainedStep(x) === step)).map((e) => e.code)
}
