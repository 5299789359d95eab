/** Each node of a `-o json` report as [node, implementer, where the doctor learnt it]: what the header says per node. */
export function nodeImplementers(json: {
  nodes: {name: string; implementer: {name: string; source: string}}[]
}): [string, string, string][] {
  return json.nodes.map((n) => [n.name, n.implementer.name, n.implementer.source])
}
