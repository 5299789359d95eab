import type {NftElement} from './nft-elements.js'

/** `nft list ruleset`, parsed into tables, base chains, regular chains, sets and maps. Rule text is kept whole. */
export interface NftRule {
  table: string
  chain: string
  line: number
  text: string
}

export interface NftBase {
  type: string
  hook: string
  priority: number
  policy: 'accept' | 'drop'
}

export interface NftChain {
  table: string
  name: string
  line: number
  /** Base chains only. */
  base?: NftBase
  rules: NftRule[]
}

export interface NftSet {
  table: string
  name: string
  line: number
  isMap: boolean
  /** Each element: its key parts (split on " . "), for maps the value text, and its comment. */
  elements: NftElement[]
  /**
   * The elements whose first key part is exactly `first`, in order, when the set can find them without reading every
   * element (each element's first key part is one plain address); undefined: look at every element.
   */
  elementsStartingWith?(first: string): NftElement[] | undefined
}

/** A table's chains by name, in the order the ruleset defines them, and its base chains without reading the others. */
export interface NftChains extends ReadonlyMap<string, NftChain> {
  bases(): NftChain[]
}

/** Chains held whole in memory (the JSON form's). */
export class ChainMap extends Map<string, NftChain> implements NftChains {
  bases(): NftChain[] {
    return [...this.values()].filter((c) => c.base !== undefined)
  }
}

export interface NftTable {
  family: string
  name: string
  /** "family name", as printed in traces. */
  id: string
  chains: NftChains
  sets: Map<string, NftSet>
}
