import {readFileSync} from 'node:fs'
import {loadAllYaml} from '@kubernetes/client-node'
import type {ApiRequest} from '../lab/apiserver.js'

export interface PolicyRule {
  apiGroups: string[]
  resources: string[]
  verbs: string[]
  resourceNames?: string[]
}

/** The rules of every ClusterRole/Role in a YAML file. */
export function readRoleRules(path: string): PolicyRule[] {
  return loadAllYaml(readFileSync(path, 'utf8'))
    .filter((d: {kind?: string}) => d?.kind === 'ClusterRole' || d?.kind === 'Role')
    .flatMap((d: {rules?: PolicyRule[]}) => d.rules ?? [])
}

/** Paths every authenticated user may read (the built-in system:discovery and system:public-info-viewer roles). */
const DISCOVERY = /^\/(version|api|apis|api\/v1|apis\/[^/]+(\/[^/]+)?)$/

/** The group a request's path names ('' for the core group), as RBAC matches it. */
function groupOf(path: string): string {
  return /^\/apis\/([^/]+)\//.exec(path)?.[1] ?? ''
}

/** The resource as RBAC names it: "pods", or "pods/exec" for a subresource. */
function rbacResource(r: ApiRequest): string | undefined {
  if (!r.resource) return undefined
  return r.subresource ? `${r.resource}/${r.subresource}` : r.resource
}

/** The rule that allows a request, 'discovery' for the paths everyone may read, or undefined when nothing does. */
export function allowingRule(rules: PolicyRule[], r: ApiRequest): PolicyRule | 'discovery' | undefined {
  if (DISCOVERY.test(r.path)) return 'discovery'
  const resource = rbacResource(r)
  if (!resource) return undefined
  const group = groupOf(r.path)
  return rules.find(
    (rule) =>
      rule.apiGroups.includes(group) &&
      rule.resources.includes(resource) &&
      rule.verbs.includes(r.verb) &&
      (!rule.resourceNames || (r.name !== undefined && rule.resourceNames.includes(r.name))),
  )
}

/** One line per (group, resource, verb, name) a rule grants, so that unused grants can be listed. */
export function grants(rules: PolicyRule[]): string[] {
  return rules.flatMap((rule) =>
    rule.apiGroups.flatMap((g) =>
      rule.resources.flatMap((res) =>
        rule.verbs.flatMap((v) => (rule.resourceNames ?? ['*']).map((n) => `${v} ${g ? `${res}.${g}` : res} ${n}`)),
      ),
    ),
  )
}

/** The grant line a request uses, in the same terms as `grants`. */
export function grantUsed(rule: PolicyRule, r: ApiRequest): string {
  const group = groupOf(r.path)
  const res = rbacResource(r)!
  return `${r.verb} ${group ? `${res}.${group}` : res} ${rule.resourceNames ? r.name : '*'}`
}
