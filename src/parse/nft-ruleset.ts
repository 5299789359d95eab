import {BufferSource, type DumpSource} from './dump-source.js'
import {parseElements, type NftElement} from './nft-elements.js'
import {indexNftRuleset, type NftIndexOptions} from './nft-index.js'
import type {NftChain, NftTable} from './nft-types.js'

export {parseElements, type NftElement}
export type {NftChain, NftRule, NftSet, NftTable} from './nft-types.js'

/** Splits on `sep` outside braces and quotes. */
export function splitTop(text: string, sep: string): string[] {
  const out: string[] = []
  let depth = 0
  let quoted = false
  let cur = ''
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]
    if (ch === '"') quoted = !quoted
    if (!quoted && ch === '{') depth++
    if (!quoted && ch === '}') depth--
    if (!quoted && depth === 0 && text.startsWith(sep, i)) {
      out.push(cur)
      cur = ''
      i += sep.length - 1
      continue
    }
    cur += ch
  }
  out.push(cur)
  return out.map((s) => s.trim()).filter((s) => s !== '')
}

export class NftRuleset {
  /** `source`: where the text of an indexed ruleset stays, read again for each chain asked for (closed by close()). */
  constructor(
    readonly tables: NftTable[] = [],
    private readonly source?: DumpSource,
  ) {}

  /** `nft list ruleset` text (see nft-index.ts: indexed in one pass, each chain read when asked for). */
  static parse(text: string): NftRuleset {
    return NftRuleset.index(new BufferSource(Buffer.from(text, 'utf8')))
  }

  /** The ruleset text `source` holds, indexed; the source stays open until close(). */
  static index(source: DumpSource, options?: NftIndexOptions): NftRuleset {
    return new NftRuleset(indexNftRuleset(source, options), source)
  }

  close(): void {
    this.source?.close()
  }

  table(id: string): NftTable | undefined {
    return this.tables.find((t) => t.id === id)
  }

  /**
   * Why a walk of a packet of these families cannot pass this hook in this input (undefined: it can): kube-proxy's
   * table is there with chains but without a base chain kube-proxy always writes at this hook (nat at prerouting, output
   * and postrouting; filter at input, forward and output), so what it does there is not in the input (a trimmed paste).
   */
  missingHook(hook: string, families: string[]): string | undefined {
    for (const t of this.tables) {
      if (!families.includes(t.family) || t.name !== 'kube-proxy') continue
      const chains = t.chains.bases()
      const whole = `paste \`nft list table ${t.id}\` whole`
      if (chains.length === 0) {
        // A table without chains (size: the names told apart, which an indexed table does only when asked).
        if (t.chains.size === 0) continue
        const names: string[] = []
        for (const name of t.chains.keys()) if (names.push(name) === 3) break
        const more = t.chains.size - names.length
        return `no hook into table ${t.id} in this input: it has chains (${names.join(', ')}${more > 0 ? `, ${more} more` : ''}) but no base chain (a trimmed table); ${whole}`
      }
      const missing = KUBE_PROXY_BASE_HOOKS.filter(
        ([type, h]) => h === hook && !chains.some((c) => c.base?.type === type && c.base.hook === hook),
      )
      if (missing.length > 0)
        return `table ${t.id} in this input has no base chain of ${missing.map(([type]) => `type ${type} hook ${hook}`).join(' nor ')} (a trimmed table): what kube-proxy does there is not known; ${whole}`
    }
    return undefined
  }

  /** Base chains at a hook, in the order the kernel runs them (priority, then definition order). */
  baseChains(hook: string, families: string[]): NftChain[] {
    return this.tables
      .filter((t) => families.includes(t.family))
      .flatMap((t) => t.chains.bases().filter((c) => c.base?.hook === hook))
      .sort((a, b) => a.base!.priority - b.base!.priority)
  }
}

/** The base chains (type, hook) every nftables-mode kube-proxy writes in its table. */
const KUBE_PROXY_BASE_HOOKS: ReadonlyArray<readonly [string, string]> = [
  ['nat', 'prerouting'],
  ['nat', 'output'],
  ['nat', 'postrouting'],
  ['filter', 'input'],
  ['filter', 'forward'],
  ['filter', 'output'],
]
