/**
 * The shape of each kind of API object, for the fields the doctor reads: an object whose field has another type (a
 * string where a list belongs, a null in a list) is refused where it is read, naming the field, instead of failing
 * somewhere inside a check. A field may be missing or null; a list's items may not.
 */

type Shape =
  | 'string'
  | 'number'
  | 'boolean'
  /** A port of a container, by number or by name. */
  | 'int-or-string'
  /** Labels, selectors, a ConfigMap's data: string values by string keys. */
  | 'string-map'
  | {list: Shape}
  | {fields: Record<string, Shape>}

const strings: Shape = {list: 'string'}
const objectReference: Shape = {fields: {kind: 'string', name: 'string', namespace: 'string', uid: 'string'}}

const metadata: Shape = {
  fields: {
    name: 'string',
    namespace: 'string',
    uid: 'string',
    labels: 'string-map',
    ownerReferences: {list: {fields: {kind: 'string', name: 'string', uid: 'string', controller: 'boolean'}}},
  },
}

const SERVICE: Shape = {
  fields: {
    metadata,
    spec: {
      fields: {
        type: 'string',
        clusterIP: 'string',
        clusterIPs: strings,
        ipFamilies: strings,
        ipFamilyPolicy: 'string',
        ports: {
          list: {
            fields: {
              name: 'string',
              protocol: 'string',
              appProtocol: 'string',
              port: 'number',
              targetPort: 'int-or-string',
              nodePort: 'number',
            },
          },
        },
        selector: 'string-map',
        externalIPs: strings,
        externalName: 'string',
        loadBalancerIP: 'string',
        loadBalancerSourceRanges: strings,
        externalTrafficPolicy: 'string',
        internalTrafficPolicy: 'string',
        healthCheckNodePort: 'number',
        sessionAffinity: 'string',
        sessionAffinityConfig: {fields: {clientIP: {fields: {timeoutSeconds: 'number'}}}},
        publishNotReadyAddresses: 'boolean',
      },
    },
    status: {
      fields: {
        loadBalancer: {
          fields: {ingress: {list: {fields: {ip: 'string', hostname: 'string', ipMode: 'string'}}}},
        },
      },
    },
  },
}

const ENDPOINT_SLICE: Shape = {
  fields: {
    metadata,
    addressType: 'string',
    endpoints: {
      list: {
        fields: {
          addresses: strings,
          conditions: {fields: {ready: 'boolean', serving: 'boolean', terminating: 'boolean'}},
          nodeName: 'string',
          zone: 'string',
          targetRef: objectReference,
          hints: {
            fields: {
              forZones: {list: {fields: {name: 'string'}}},
              forNodes: {list: {fields: {name: 'string'}}},
            },
          },
        },
      },
    },
    ports: {list: {fields: {name: 'string', port: 'number', protocol: 'string', appProtocol: 'string'}}},
  },
}

const endpointAddress: Shape = {
  list: {fields: {ip: 'string', hostname: 'string', nodeName: 'string', targetRef: objectReference}},
}

const ENDPOINTS: Shape = {
  fields: {
    metadata,
    subsets: {
      list: {
        fields: {
          addresses: endpointAddress,
          notReadyAddresses: endpointAddress,
          ports: {list: {fields: {name: 'string', port: 'number', protocol: 'string', appProtocol: 'string'}}},
        },
      },
    },
  },
}

const POD: Shape = {
  fields: {
    metadata,
    spec: {
      fields: {
        nodeName: 'string',
        hostNetwork: 'boolean',
        containers: {
          list: {
            fields: {
              name: 'string',
              image: 'string',
              ports: {
                list: {fields: {name: 'string', containerPort: 'number', hostPort: 'number', protocol: 'string'}},
              },
            },
          },
        },
      },
    },
    status: {
      fields: {
        phase: 'string',
        reason: 'string',
        hostIP: 'string',
        podIP: 'string',
        podIPs: {list: {fields: {ip: 'string'}}},
        conditions: {list: {fields: {type: 'string', status: 'string'}}},
        containerStatuses: {
          list: {
            fields: {name: 'string', ready: 'boolean', image: 'string', imageID: 'string', restartCount: 'number'},
          },
        },
      },
    },
  },
}

const NODE: Shape = {
  fields: {
    metadata,
    spec: {fields: {podCIDR: 'string', podCIDRs: strings, unschedulable: 'boolean'}},
    status: {
      fields: {
        addresses: {list: {fields: {type: 'string', address: 'string'}}},
        conditions: {list: {fields: {type: 'string', status: 'string', reason: 'string', message: 'string'}}},
      },
    },
  },
}

const CONFIG_MAP: Shape = {fields: {metadata, data: 'string-map'}}

const labelSelector: Shape = {
  fields: {
    matchLabels: 'string-map',
    matchExpressions: {list: {fields: {key: 'string', operator: 'string', values: strings}}},
  },
}
const policyPeers: Shape = {
  list: {
    fields: {
      podSelector: labelSelector,
      namespaceSelector: labelSelector,
      ipBlock: {fields: {cidr: 'string', except: strings}},
    },
  },
}
const policyPorts: Shape = {list: {fields: {protocol: 'string', port: 'int-or-string', endPort: 'number'}}}

/** `_from` is the client library's spelling of `from`, `from` kubectl's (a hand-made bundle). */
const NETWORK_POLICY: Shape = {
  fields: {
    metadata,
    spec: {
      fields: {
        podSelector: labelSelector,
        policyTypes: strings,
        ingress: {list: {fields: {_from: policyPeers, from: policyPeers, ports: policyPorts}}},
        egress: {list: {fields: {to: policyPeers, ports: policyPorts}}},
      },
    },
  },
}

const NAMESPACE: Shape = {fields: {metadata}}

/** Any custom object (cluster/cluster-source.ts CustomResource): what names it. */
const customObjectFields: Record<string, Shape> = {apiVersion: 'string', kind: 'string', metadata}
const CUSTOM_OBJECT: Shape = {fields: customObjectFields}

/** Calico's Felix configuration (crd.projectcalico.org/v1, projectcalico.org/v3): whether its eBPF dataplane is on. */
const FELIX_CONFIGURATION: Shape = {
  fields: {...customObjectFields, spec: {fields: {bpfEnabled: 'boolean'}}},
}
const namespacedPods: Shape = {fields: {namespaceSelector: labelSelector, podSelector: labelSelector}}
const adminPeers: Shape = {
  list: {
    fields: {
      namespaces: labelSelector,
      pods: namespacedPods,
      nodes: labelSelector,
      networks: strings,
      domainNames: strings,
    },
  },
}
const adminPorts: Shape = {
  list: {
    fields: {
      portNumber: {fields: {protocol: 'string', port: 'number'}},
      namedPort: 'string',
      portRange: {fields: {protocol: 'string', start: 'number', end: 'number'}},
    },
  },
}
const adminRules: Shape = {
  list: {fields: {name: 'string', action: 'string', from: adminPeers, to: adminPeers, ports: adminPorts}},
}
const adminSpec = {
  subject: {fields: {namespaces: labelSelector, pods: namespacedPods}},
  ingress: adminRules,
  egress: adminRules,
} as const
const ADMIN_NETWORK_POLICY: Shape = {fields: {metadata, spec: {fields: {priority: 'number', ...adminSpec}}}}
const BASELINE_ADMIN_NETWORK_POLICY: Shape = {fields: {metadata, spec: {fields: adminSpec}}}

/** The kinds the doctor reads, each with the shape of what it reads of them. */
const OBJECT_SHAPES = {
  Service: SERVICE,
  EndpointSlice: ENDPOINT_SLICE,
  Endpoints: ENDPOINTS,
  Pod: POD,
  Node: NODE,
  ConfigMap: CONFIG_MAP,
  NetworkPolicy: NETWORK_POLICY,
  Namespace: NAMESPACE,
  CustomObject: CUSTOM_OBJECT,
  FelixConfiguration: FELIX_CONFIGURATION,
  AdminNetworkPolicy: ADMIN_NETWORK_POLICY,
  BaselineAdminNetworkPolicy: BASELINE_ADMIN_NETWORK_POLICY,
} as const

export type ObjectKind = keyof typeof OBJECT_SHAPES

/** A custom resource's kind whose shape is known here; others are read as any custom object. */
export const customObjectKind = (kind: string): ObjectKind =>
  kind in OBJECT_SHAPES ? (kind as ObjectKind) : 'CustomObject'

/** What a value is, in words: "a string", "a list", "null". */
function whatIs(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'a list'
  if (typeof value === 'object') return 'an object'
  return `a ${typeof value}`
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The first field of `value` that does not have its shape, as "FIELD: WHAT IT SHOULD BE, is WHAT IT IS". */
function shapeProblem(value: unknown, shape: Shape, path: string): string | undefined {
  const field = path || 'the object'
  const wrong = (wanted: string) => `${field} should be ${wanted}, is ${whatIs(value)}`
  if (shape === 'string') return typeof value === 'string' ? undefined : wrong('a string')
  if (shape === 'boolean') return typeof value === 'boolean' ? undefined : wrong('true or false')
  if (shape === 'number') return Number.isFinite(value) ? undefined : wrong('a number')
  if (shape === 'int-or-string')
    return typeof value === 'string' || Number.isFinite(value) ? undefined : wrong('a number or a name')
  if (shape === 'string-map') {
    if (!isPlainObject(value)) return wrong('a map of strings')
    const bad = Object.entries(value).find(([, v]) => typeof v !== 'string')
    return bad ? `${path}.${bad[0]} should be a string, is ${whatIs(bad[1])}` : undefined
  }
  if ('list' in shape) {
    if (!Array.isArray(value)) return wrong('a list')
    for (const [i, item] of value.entries()) {
      const problem = shapeProblem(item, shape.list, `${path}[${i}]`)
      if (problem) return problem
    }
    return undefined
  }
  if (!isPlainObject(value)) return wrong('an object')
  for (const [name, inner] of Object.entries(shape.fields)) {
    const v = value[name]
    if (v === undefined || v === null) continue
    const problem = shapeProblem(v, inner, path ? `${path}.${name}` : name)
    if (problem) return problem
  }
  return undefined
}

/** Why `value` cannot be read as a `kind` (its first wrong-typed field), or undefined when it can. */
export function objectProblem(kind: ObjectKind, value: unknown): string | undefined {
  const problem = shapeProblem(value, OBJECT_SHAPES[kind], '')
  if (problem) return problem
  const name = (value as {metadata?: {name?: unknown}}).metadata?.name
  return typeof name === 'string' && name !== '' ? undefined : 'metadata.name is missing'
}
