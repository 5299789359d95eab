import {inCidr} from '../trace/addresses.js'

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

  static parse(text: string): IpsetState {
    const state = new IpsetState()
    for (const [i, raw] of text.split('\n').entries()) {
      const line = raw.trim()
      if (line === '' || line.startsWith('#')) continue
      const words = line.split(/\s+/)
      if (words[0] === 'create' && words.length >= 3) state.sets.set(words[1], {name: words[1], type: words[2], members: []})
      else if (words[0] === 'add' && words.length >= 3) {
        const set = state.sets.get(words[1])
        if (!set) throw new Error(`line ${i + 1}: add to undeclared set ${words[1]}`)
        set.members.push(words[2])
      } else throw new Error(`line ${i + 1}: not ipset save output: "${line.slice(0, 60)}"`)
    }
    return state
  }

  /** undefined when the set is unknown or its type is not understood. */
  matches(name: string, flags: string, p: IpsetPacket): boolean | undefined {
    const set = this.sets.get(name)
    if (!set) return undefined
    const dims = set.type.replace(/^(hash|bitmap|list):/, '').split(',')
    const dirs = flags.split(',')
    const value = (i: number): string => (dirs[i] === 'src' ? (dims[i] === 'port' ? String(p.sport) : p.src) : dims[i] === 'port' ? String(p.dport) : p.dst)
    if (!dims.every((d) => d === 'ip' || d === 'net' || d === 'port')) return undefined
    return set.members.some((member) => {
      const parts = member.split(',')
      return dims.every((d, i) => {
        const part = parts[i] ?? ''
        if (d === 'port') {
          const [proto, port] = part.includes(':') ? part.split(':') : ['tcp', part]
          return proto === p.proto && Number(port) === Number(value(i))
        }
        if (d === 'net') return inCidr(part.includes('/') ? part : `${part}/32`, value(i))
        return part === value(i)
      })
    })
  }
}
