/** A Kubernetes object name that is an RFC 1123 subdomain (Nodes, most kinds): safe in paths and printed commands. */
export function isNodeName(name: string): boolean {
  return name.length <= 253 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(name)
}
