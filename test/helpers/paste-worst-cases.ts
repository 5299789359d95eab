import {normaliseIptablesPaste, normaliseNftPaste} from '../../src/parse/paste-normalise.js'

/**
 * Pastes built to hit regular expressions that backtrack over a run of white space: each is linear work for a linear
 * expression and quadratic for one that tries every start position in the run (or two overlapping \s repetitions).
 */
export const PASTE_WORST_CASES: Record<string, {nft: boolean; make: (bytes: number) => string}> = {
  'a line of spaces': {nft: true, make: (n) => `x${' '.repeat(n)}y`},
  'a line of spaces and tabs': {nft: true, make: (n) => ` \t`.repeat(n / 2)},
  'a handle comment followed by spaces and text': {nft: true, make: (n) => `# handle 1${' '.repeat(n)}x`},
  'spaces before a handle comment that does not end the line': {
    nft: true,
    make: (n) => `${' '.repeat(n)}# handle 1 x`,
  },
  'many handle comments on one line': {nft: true, make: (n) => ' # handle 1'.repeat(n / 11)},
  'an -s followed by spaces and no address': {nft: false, make: (n) => `-A X -s${' '.repeat(n)}x\n-A X -j DROP`},
  'an -s ! followed by spaces and no address': {nft: false, make: (n) => `-A X -s !${' '.repeat(n)}!x\n-A X -j DROP`},
  'a mail quote of many quote marks': {nft: true, make: (n) => '>'.repeat(n)},
}

/**
 * Normalises one worst case of `bytes` as the paste it is (nft or iptables) and returns the normalised length.
 * @public
 */
export function normaliseWorstCase(name: string, bytes: number): number {
  const c = PASTE_WORST_CASES[name]
  const text = c.make(bytes)
  try {
    return (c.nft ? normaliseNftPaste(text) : normaliseIptablesPaste(text, 4)).text.length
  } catch (e) {
    // A paste the normaliser refuses (naming the line) is an answer too.
    if (/line \d+/.test((e as Error).message)) return -1
    throw e
  }
}
