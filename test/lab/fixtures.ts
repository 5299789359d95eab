import {
  CLUSTER_CIDR,
  endpointPort,
  familyView,
  selects,
  type LabNode,
  type LabPod,
  type LabService,
} from './lab-cluster.js'

const created = '2026-11-01T00:00:00Z'

export function nodeObject(n: LabNode) {
  return {
    metadata: {name: n.name, labels: {'kubernetes.io/hostname': n.name}, creationTimestamp: created},
    spec: {podCIDR: n.podCIDR, podCIDRs: [n.podCIDR, ...(n.podCIDR6 ? [n.podCIDR6] : [])]},
    status: {
      addresses: [
        {type: 'InternalIP', address: n.ip},
        ...(n.ip6 ? [{type: 'InternalIP', address: n.ip6}] : []),
        {type: 'Hostname', address: n.name},
      ],
      conditions: [{type: 'Ready', status: 'True', reason: 'KubeletReady'}],
    },
  }
}

export function podObject(p: LabPod) {
  const ready = p.ready ? 'True' : 'False'
  return {
    metadata: {
      name: p.name,
      namespace: p.namespace,
      labels: p.labels,
      uid: `uid-${p.name}`,
      creationTimestamp: created,
    },
    spec: {
      nodeName: p.node,
      containers: [
        {
          name: p.kind,
          image: `lab/${p.kind}`,
          ports: p.port ? [{name: p.portName, containerPort: p.port, protocol: 'TCP'}] : [],
        },
      ],
    },
    status: {
      phase: 'Running',
      podIP: p.ip,
      podIPs: [{ip: p.ip}, ...(p.ip6 ? [{ip: p.ip6}] : [])],
      conditions: [
        {
          type: 'Ready',
          status: ready,
          ...(p.ready ? {} : {reason: 'ContainersNotReady', message: `containers with unready status: [${p.kind}]`}),
        },
      ],
      containerStatuses: [
        {
          name: p.kind,
          ready: p.ready,
          restartCount: 0,
          image: `lab/${p.kind}`,
          imageID: '',
          started: true,
          state: {running: {startedAt: created}},
        },
      ],
    },
  }
}

export function serviceObject(s: LabService) {
  return {
    metadata: {
      name: s.name,
      namespace: s.namespace,
      ...(s.namespace === 'kube-system' ? {labels: {'k8s-app': 'kube-dns'}} : {}),
      creationTimestamp: created,
    },
    spec: {
      type: s.type,
      clusterIP: s.clusterIP,
      clusterIPs: [s.clusterIP, ...(s.clusterIP6 ? [s.clusterIP6] : [])],
      selector: s.selector,
      ports: s.ports.map((p) => ({
        name: p.name,
        port: p.port,
        targetPort: p.targetPort,
        protocol: p.protocol,
        ...(p.nodePort ? {nodePort: p.nodePort} : {}),
      })),
      sessionAffinity: s.affinitySeconds ? 'ClientIP' : 'None',
      ...(s.affinitySeconds ? {sessionAffinityConfig: {clientIP: {timeoutSeconds: s.affinitySeconds}}} : {}),
      externalTrafficPolicy: s.type === 'NodePort' ? (s.externalTrafficPolicy ?? 'Cluster') : undefined,
      internalTrafficPolicy: 'Cluster',
      ipFamilies: s.clusterIP6 ? ['IPv4', 'IPv6'] : ['IPv4'],
      ipFamilyPolicy: s.clusterIP6 ? 'RequireDualStack' : 'SingleStack',
    },
    status: {loadBalancer: {}},
  }
}

/** The Service's EndpointSlice of one address family (IPv6: its Pods' IPv6 addresses, as the controller writes a second slice). */
export function endpointSliceObject(svc: LabService, allPods: LabPod[], family: 4 | 6 = 4) {
  const {pods} = familyView(family, [svc], allPods)
  const s = svc
  // As the EndpointSlice controller does: a Pod on which no port of the Service resolves gets no endpoint.
  const selected = pods.filter((p) => selects(s, p) && s.ports.some((sp) => endpointPort(sp, p) > 0))
  return {
    metadata: {
      name: family === 6 ? `${s.name}-v6d34` : `${s.name}-abc12`,
      namespace: s.namespace,
      labels: {
        'kubernetes.io/service-name': s.name,
        'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io',
      },
      creationTimestamp: created,
    },
    addressType: family === 6 ? 'IPv6' : 'IPv4',
    endpoints: selected.map((p) => ({
      addresses: [p.ip],
      conditions: {ready: p.ready, serving: p.ready, terminating: false},
      nodeName: p.node,
      targetRef: {kind: 'Pod', name: p.name, namespace: p.namespace, uid: `uid-${p.name}`},
    })),
    ports: s.ports.map((sp) => ({
      name: sp.name,
      port:
        selected.map((p) => endpointPort(sp, p)).find((x) => x > 0) ??
        (typeof sp.targetPort === 'number' ? sp.targetPort : 0),
      protocol: sp.protocol,
    })),
  }
}

export function kubeProxyConfigMap() {
  return {
    metadata: {name: 'kube-proxy', namespace: 'kube-system', creationTimestamp: created},
    data: {
      'config.conf': `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clusterCIDR: ${CLUSTER_CIDR}
iptables:
  masqueradeAll: false
  masqueradeBit: 14
  minSyncPeriod: 1s
mode: "iptables"
`,
    },
  }
}

/** kube-proxy's DaemonSet Pod on a node, running and ready or crash-looping. */
export function kubeProxyPodObject(node: string, ready: boolean) {
  return {
    metadata: {
      name: `kube-proxy-${node.slice(-1)}x7k2`,
      namespace: 'kube-system',
      labels: {'k8s-app': 'kube-proxy'},
      creationTimestamp: created,
    },
    spec: {
      nodeName: node,
      hostNetwork: true,
      containers: [{name: 'kube-proxy', image: 'registry.k8s.io/kube-proxy:v1.33.0'}],
    },
    status: {
      phase: 'Running',
      conditions: [{type: 'Ready', status: ready ? 'True' : 'False'}],
      containerStatuses: [
        ready
          ? {
              name: 'kube-proxy',
              ready: true,
              restartCount: 0,
              image: '',
              imageID: '',
              state: {running: {startedAt: created}},
            }
          : {
              name: 'kube-proxy',
              ready: false,
              restartCount: 7,
              image: '',
              imageID: '',
              state: {waiting: {reason: 'CrashLoopBackOff'}},
              lastState: {terminated: {reason: 'Error', exitCode: 1}},
            },
      ],
    },
  }
}

/** A pod's container ID in the lab (64 hex digits, as containerd's). */
function containerId(p: LabPod): string {
  return Buffer.from(`sandbox-${p.name}`).toString('hex').padEnd(64, '0').slice(0, 64)
}

/**
 * libcni's cache file for a pod attached by the bridge plugin (as containerd writes it for kubenet/flannel):
 * `/var/lib/cni/results/<network>-<containerID>-eth0`, one line of JSON; the bridge and the host veth have no
 * `sandbox`, the pod's eth0 has its netns; `ips[].interface` is the index of eth0.
 */
export function cniCacheFile(p: LabPod, gateway: string, network = 'cbr0'): {name: string; json: string} {
  const id = containerId(p)
  const netns = `/var/run/netns/cni-${id.slice(0, 8)}-${id.slice(8, 12)}`
  const result = {
    cniVersion: '1.0.0',
    interfaces: [
      {name: 'cbr0', mac: '02:00:00:00:00:01'},
      {name: `v${p.name}`.slice(0, 15), mac: '02:00:00:00:02:01'},
      {name: 'eth0', mac: '02:00:00:00:03:01', sandbox: netns},
    ],
    ips: [{address: `${p.ip}/24`, gateway, interface: 2}],
    routes: [{dst: '0.0.0.0/0', gw: gateway}],
    dns: {},
  }
  const config = Buffer.from(
    JSON.stringify({
      cniVersion: '1.0.0',
      name: network,
      plugins: [{type: 'bridge', bridge: 'cbr0', hairpinMode: true}],
    }),
  ).toString('base64')
  const cached = {
    kind: 'cniCacheV1',
    containerId: id,
    config,
    ifName: 'eth0',
    networkName: network,
    netns,
    cniArgs: [
      ['K8S_POD_NAMESPACE', p.namespace],
      ['K8S_POD_NAME', p.name],
      ['K8S_POD_INFRA_CONTAINER_ID', id],
    ],
    result,
  }
  return {name: `${network}-${id}-eth0`, json: JSON.stringify(cached)}
}

/** What `grep -r -H -s . /var/lib/cni/results` prints for these cache files. */
export function cniCacheGrep(files: Array<{name: string; json: string}>): string {
  return files
    .map((f) =>
      f.json
        .split('\n')
        .map((line) => `/var/lib/cni/results/${f.name}:${line}\n`)
        .join(''),
    )
    .join('')
}
