import {ParseError} from './parse-error.js'
import {inCidr} from '../net/address.js'

export interface IpsetPacket {
  src: string
  dst: string
  proto: string
  dport: number
  sport: number
}

interface IpsetDef {
  name: string
  type: string
  members: string[]
}

/** The sets of an `ipset save` dump, able to answer -m set --match-set NAME FLAGS for a packet. */
export class IpsetState {
  readonly sets = new Map<string, IpsetDef>()

  /** Reads `ipset save` or `ipset list` output. */
  static parse(text: string): IpsetState {
    const state = new IpsetState()
    if (/^Name: /m.test(text)) return IpsetState.parseList(text)
    for (const [i, raw] of text.split('\n').entries()) {
      const line = raw.trim()
      if (line === '' || line.startsWith('#')) continue
      const words = line.split(/\s+/)
      if (words[0] === 'create' && words.length >= 3)
        state.sets.set(words[1], {name: words[1], type: words[2], members: []})
      else if (words[0] === 'add' && words.length >= 3) {
        const set = state.sets.get(words[1])
        if (!set) throw new ParseError(i + 1, `add to undeclared set ${words[1]}`)
        set.members.push(words[2])
      } else throw new ParseError(i + 1, `not ipset save output: "${line.slice(0, 60)}"`)
    }
    return state
  }

  private static parseList(text: string): IpsetState {
    const state = new IpsetState()
    let set: IpsetDef | undefined
    let members = false
    for (const raw of text.split('\n')) {
      const line = raw.trim()
      const name = /^Name:\s+(\S+)/.exec(line)
      if (name) {
        set = {name: name[1], type: '', members: []}
        state.sets.set(set.name, set)
        members = false
        continue
      }
      const type = /^Type:\s+(\S+)/.exec(line)
      if (type && set) set.type = type[1]
      else if (line === 'Members:') members = true
      else if (members && set && line !== '') set.members.push(line.split(/\s+/)[0])
    }
    return state
  }

  has(name: string, member: string): boolean {
    return this.sets.get(name)?.members.includes(member) ?? false
  }

  /** undefined when the set is unknown or its type is not understood. */
  matches(name: string, flags: string, p: IpsetPacket): boolean | undefined {
    const set = this.sets.get(name)
    if (!set) return undefined
    const dims = set.type.replace(/^(hash|bitmap|list):/, '').split(',')
    const dirs = flags.split(',')
    const value = (i: number): string =>
      dirs[i] === 'src' ? (dims[i] === 'port' ? String(p.sport) : p.src) : dims[i] === 'port' ? String(p.dport) : p.dst
    if (!dims.every((d) => d === 'ip' || d === 'net' || d === 'port')) return undefined
    // With fewer direction flags than the set has dimensions, only the first ones are compared.
    const used = dims.slice(0, Math.min(dims.length, dirs.length))
    return set.members.some((member) => {
      const parts = member.split(',')
      return used.every((d, i) => {
        const part = parts[i] ?? ''
        if (d === 'port') {
          // bitmap:port sets hold bare ports (one set per protocol); hash sets hold proto:port.
          if (!part.includes(':')) return Number(part) === Number(value(i))
          const [proto, port] = part.split(':')
          return proto === p.proto && Number(port) === Number(value(i))
        }
        if (d === 'net') return inCidr(part.includes('/') ? part : `${part}/32`, value(i))
        return part === value(i)
      })
    })
  }
}
