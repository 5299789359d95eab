import {nftRulesetFromJson} from './nft-json.js'
import {NftRuleset} from './nft-ruleset.js'

/** Either form of an nftables ruleset: `nft list ruleset` text or `nft -j list ruleset` JSON. */
export function parseNftDump(text: string): NftRuleset {
  return /^\s*\{/.test(text) ? nftRulesetFromJson(text) : NftRuleset.parse(text)
}
