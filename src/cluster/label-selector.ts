import {DiagnosisError} from '../errors.js'

type Requirement = (labels: Record<string, string>) => boolean

const KEY = String.raw`[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?`
const VALUE = String.raw`([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?`
const FORMS: Array<[RegExp, (m: RegExpExecArray) => Requirement]> = [
  [new RegExp(`^(${KEY})\\s+in\\s+\\(([^)]*)\\)$`), (m) => inSet(m[1], values(m[3]), true)],
  [new RegExp(`^(${KEY})\\s+notin\\s+\\(([^)]*)\\)$`), (m) => inSet(m[1], values(m[3]), false)],
  [new RegExp(`^(${KEY})\\s*!=\\s*(${VALUE})$`), (m) => (l) => l[m[1]] !== m[3]],
  [new RegExp(`^(${KEY})\\s*==?\\s*(${VALUE})$`), (m) => (l) => l[m[1]] === m[3]],
  [new RegExp(`^!\\s*(${KEY})$`), (m) => (l) => !(m[1] in l)],
  [new RegExp(`^(${KEY})$`), (m) => (l) => m[1] in l],
]

function values(list: string): string[] {
  return list.split(',').map((v) => v.trim())
}

function inSet(key: string, set: string[], wanted: boolean): Requirement {
  return (l) => (key in l && set.includes(l[key])) === wanted
}

/** Splits on commas outside parentheses: `app in (a,b),tier=web` is two requirements. */
function requirements(selector: string): string[] {
  const parts: string[] = []
  let depth = 0
  let start = 0
  for (let i = 0; i < selector.length; i++) {
    if (selector[i] === '(') depth++
    else if (selector[i] === ')') depth--
    else if (selector[i] === ',' && depth === 0) {
      parts.push(selector.slice(start, i))
      start = i + 1
    }
  }
  parts.push(selector.slice(start))
  return parts.map((p) => p.trim())
}

/** A Kubernetes label selector (`-l`): equality, inequality, existence, `in` and `notin`, as kubectl takes them. */
export function parseLabelSelector(selector: string): (labels: Record<string, string> | undefined) => boolean {
  const checks = requirements(selector).map((part) => {
    for (const [form, build] of FORMS) {
      const m = form.exec(part)
      if (m) return build(m)
    }
    throw new DiagnosisError(
      `label selector "${selector}": cannot read "${part}" (use key=value, key!=value, key, !key, key in (a,b), key notin (a,b))`,
    )
  })
  return (labels) => checks.every((check) => check(labels ?? {}))
}
