import {ParseError} from './parse-error.js'
import {joinHostPort} from '../net/host-port.js'
import {nestsDeeperThan} from './json-depth.js'
import {NftRuleset, type NftChain, type NftSet, type NftTable} from './nft-ruleset.js'
import {ChainMap} from './nft-types.js'

/**
 * `nft -j list ruleset` JSON, read into the same structure as the text form. Each rule's expressions are written
 * back in nft's own syntax, so one tracer reads both; a rule's `line` is its handle.
 */
type J = unknown
type Obj = Record<string, unknown>

const isObj = (x: J): x is Obj => typeof x === 'object' && x !== null && !Array.isArray(x)
const list = (x: J): J[] => (Array.isArray(x) ? x : [])

/** Deeper than anything nft prints (a rule's expressions nest about 8 levels): more is not nft's output. */
const MAX_NESTING = 64

function hex(n: J): string {
  return typeof n === 'number' ? `0x${n.toString(16).padStart(8, '0')}` : value(n)
}

/** A value or selector expression. */
function value(e: J): string {
  if (typeof e === 'string') return /\s/.test(e) ? `"${e}"` : e
  if (typeof e === 'number') return String(e)
  if (Array.isArray(e)) return `{ ${e.map(value).join(', ')} }`
  if (!isObj(e)) return String(e)
  const [k, v] = Object.entries(e)[0] ?? ['', undefined]
  const o = (isObj(v) ? v : {}) as Obj
  switch (k) {
    case 'payload':
      return `${o.protocol} ${o.field}`
    case 'meta':
      return o.key === 'iifname' || o.key === 'oifname' ? String(o.key) : `meta ${o.key}`
    case 'ct':
      return `ct ${o.key}`
    case 'fib':
      return `fib ${((o.flags as string[] | string | undefined) ?? []).toString().replace(/,/g, ' . ')} ${o.result}`
    case '&':
    case '|':
    case '^': {
      const [a, b] = list(v)
      return `${value(a)} ${k} ${hex(b)}`
    }
    case 'concat':
      return list(v).map(value).join(' . ')
    case 'prefix':
      return `${o.addr}/${o.len}`
    case 'range': {
      const [a, b] = list(v)
      return `${value(a)}-${value(b)}`
    }
    case 'set':
      return `{ ${list(v)
        .map((x) => (Array.isArray(x) ? `${value(x[0])} : ${verdict(x[1])}` : value(x)))
        .join(', ')} }`
    case 'numgen':
      return `numgen ${o.mode} mod ${o.mod}${o.offset ? ` offset ${o.offset}` : ''}`
    case 'elem':
      return value(o.val)
  }
  return `json-${k}`
}

function verdict(e: J): string {
  if (!isObj(e)) return String(e)
  const [k, v] = Object.entries(e)[0] ?? ['json-empty', undefined]
  if (k === 'jump' || k === 'goto') return `${k} ${isObj(v) ? String(v.target) : 'json-no-target'}`
  return k
}

/** One statement of a rule. */
function statement(e: J): string {
  if (!isObj(e)) return `json-${String(e)}`
  const [k, v] = Object.entries(e)[0] ?? ['empty', undefined]
  const o = (isObj(v) ? v : {}) as Obj
  switch (k) {
    case 'match': {
      const op = o.op === '==' || o.op === 'in' ? '' : `${o.op} `
      return `${value(o.left)} ${op}${value(o.right)}`
    }
    case 'jump':
    case 'goto':
      return `${k} ${o.target}`
    case 'accept':
    case 'drop':
    case 'return':
    case 'continue':
    case 'counter':
    case 'log':
      return k
    case 'reject':
      return 'reject'
    case 'masquerade':
      return 'masquerade'
    case 'dnat':
    case 'snat': {
      const addr = String(o.addr ?? '')
      return `${k} to ${o.port !== undefined ? joinHostPort(addr, Number(o.port)) : addr.includes(':') ? `[${addr}]` : addr}`
    }
    case 'redirect':
      return `redirect to :${o.port ?? ''}`
    case 'mangle': {
      const key = value(o.key)
      return `${key} set ${value(o.value)}`
    }
    case 'vmap':
      return `${value(o.key)} vmap ${value(o.data)}`
    case 'set':
      return `${o.op} ${o.set} { ${value(o.elem)} }`
    case 'xt':
      // iptables-nft's untranslated match or target, as the text form prints it.
      return `xt ${String(o.type)} ${String(o.name)}`
    case 'limit':
      return `limit rate ${o.inv === true ? 'over ' : ''}${String(o.rate)}/${String(o.per)}`
  }
  return `json-${k}`
}

/** A set element as nft prints it in JSON: a bare value, or {"elem": {"val": …, "comment": …, "timeout": …}}. */
function element(x: J): {parts: string[]; comment?: string} {
  let val = x
  let comment: string | undefined
  if (isObj(x) && isObj(x.elem)) {
    val = x.elem.val
    if (typeof x.elem.comment === 'string') comment = x.elem.comment
  }
  const parts = isObj(val) && Array.isArray(val.concat) ? val.concat.map(value) : [value(val)]
  return comment === undefined ? {parts} : {parts, comment}
}

function elementsOf(elem: J, isMap: boolean, where: string): NftSet['elements'] {
  if (elem === undefined) return []
  if (!Array.isArray(elem)) throw new ParseError(1, `${where}: "elem" is not a list`)
  return elem.map((x) => {
    if (isMap && !(Array.isArray(x) && x.length === 2))
      throw new ParseError(1, `${where}: map element is not a [key, value] pair`)
    const [key, val] = isMap && Array.isArray(x) ? [x[0], x[1]] : [x, undefined]
    const {parts, comment} = element(key)
    const out: NftSet['elements'][number] = {key: parts}
    if (val !== undefined)
      out.value =
        isObj(val) &&
        ('jump' in val || 'goto' in val || Object.keys(val).length === 1) &&
        !('concat' in val) &&
        !('prefix' in val) &&
        !('range' in val)
          ? verdict(val)
          : value(val)
    if (comment !== undefined) out.comment = comment
    return out
  })
}

export function nftRulesetFromJson(text: string): NftRuleset {
  let doc: {nftables?: J[]}
  try {
    doc = JSON.parse(text) as {nftables?: J[]}
  } catch (e) {
    // One line: JSON.parse quotes the input around the fault, line breaks included.
    throw new ParseError(1, `not JSON: ${(e as Error).message.replace(/\s+/g, ' ')}`, {cause: e})
  }
  if (!isObj(doc) || !Array.isArray(doc.nftables))
    throw new ParseError(1, 'no "nftables" array: not `nft -j list ruleset` output')
  if (nestsDeeperThan(doc, MAX_NESTING))
    throw new ParseError(1, `nested deeper than ${MAX_NESTING} levels: not \`nft -j list ruleset\` output`)
  const rs = new NftRuleset()
  const byId = new Map<string, JsonTable>()
  const table = (family: J, name: J): JsonTable => {
    const id = `${family} ${name}`
    let t = byId.get(id)
    if (!t) {
      t = {family: String(family), name: String(name), id, chains: new ChainMap(), sets: new Map()}
      rs.tables.push(t)
      byId.set(id, t)
    }
    return t
  }
  for (const [i, item] of doc.nftables.entries()) {
    if (!isObj(item)) continue
    const [kind, body] = Object.entries(item)[0] ?? ['', undefined]
    if (!isObj(body)) throw new ParseError(i + 1, `item ${i + 1} of the "nftables" array is not {"KIND": {...}}`)
    try {
      readItem(rs, table, kind, body, i)
    } catch (e) {
      // A value of a shape nft never prints (e.g. an object where a name belongs) cannot be turned into text.
      if (e instanceof TypeError)
        throw new ParseError(
          i + 1,
          `item ${i + 1} (a ${JSON.stringify(kind)}) holds a value of the wrong shape: ${e.message.replace(/\s+/g, ' ')}`,
          {cause: e},
        )
      throw e
    }
  }
  if (rs.tables.length === 0) throw new ParseError(1, 'no table in the JSON ruleset')
  return rs
}

/** A table of the JSON form: its chains are filled in as its items come. */
type JsonTable = NftTable & {chains: ChainMap}

function readItem(rs: NftRuleset, table: (family: J, name: J) => JsonTable, kind: string, body: Obj, i: number): void {
  {
    if (kind === 'table') table(body.family, body.name)
    else if (kind === 'chain') {
      const t = table(body.family, body.table)
      const chain: NftChain = {table: t.id, name: String(body.name), line: Number(body.handle ?? i + 1), rules: []}
      if (body.hook)
        chain.base = {
          type: String(body.type),
          hook: String(body.hook),
          priority: Number(body.prio ?? 0),
          policy: body.policy === 'drop' ? 'drop' : 'accept',
        }
      t.chains.set(chain.name, chain)
    } else if (kind === 'set' || kind === 'map') {
      const t = table(body.family, body.table)
      t.sets.set(String(body.name), {
        table: t.id,
        name: String(body.name),
        line: Number(body.handle ?? i + 1),
        isMap: kind === 'map',
        elements: elementsOf(body.elem, kind === 'map', `${kind} ${JSON.stringify(String(body.name))}`),
      })
    } else if (kind === 'rule') {
      const t = table(body.family, body.table)
      const chain = t.chains.get(String(body.chain))
      if (!chain) throw new ParseError(i + 1, `rule for unknown chain ${JSON.stringify(String(body.chain))}`)
      if (body.expr !== undefined && !Array.isArray(body.expr))
        throw new ParseError(i + 1, `item ${i + 1}: the rule's "expr" is not a list`)
      const text = list(body.expr).map(statement).join(' ')
      chain.rules.push({table: t.id, chain: chain.name, line: Number(body.handle ?? i + 1), text})
    }
  }
}
