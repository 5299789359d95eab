import {parseDeviceAddresses, parseSysctl as parseIpvsSysctl} from '../../src/parse/ipvsadm.js'
import {normaliseIptablesPaste, normaliseNftPaste} from '../../src/parse/paste-normalise.js'
import {parseSysctl} from '../../src/parse/sysctl.js'

/** Runs a parser on text, a parse error (which names the line) being an answer too; returns how much it read. */
function answer(parse: (text: string) => unknown, text: string): number {
  try {
    parse(text)
  } catch (e) {
    if (!/line \d+/.test((e as Error).message)) throw e
  }
  return text.length
}

const nft = (text: string) => answer(normaliseNftPaste, text)
const iptables = (text: string) => answer((t) => normaliseIptablesPaste(t, 4), text)
const sysctl = (text: string) => answer(parseSysctl, text)

/**
 * Inputs built to hit regular expressions that backtrack: a run of white space tried from every start, two
 * overlapping \s repetitions, a lazy match retried at every ':' because the line holds a line separator (U+2028),
 * which `.` does not match, so `(.*)$` fails each time. Each is linear work for a linear expression and quadratic
 * otherwise. Each case makes its input of about `bytes` and parses it.
 */
export const WORST_CASES: Record<string, (bytes: number) => number> = {
  'nft paste: a line of spaces': (n) => nft(`x${' '.repeat(n)}y`),
  'nft paste: a line of spaces and tabs': (n) => nft(` \t`.repeat(n / 2)),
  'nft paste: a handle comment followed by spaces and text': (n) => nft(`# handle 1${' '.repeat(n)}x`),
  'nft paste: spaces before a handle comment that does not end the line': (n) => nft(`${' '.repeat(n)}# handle 1 x`),
  'nft paste: many handle comments on one line': (n) => nft(' # handle 1'.repeat(n / 11)),
  'nft paste: a mail quote of many quote marks': (n) => nft('>'.repeat(n)),
  'nft paste: a shell prompt, spaces and a line separator': (n) => nft(`$${' '.repeat(n)}x\u2028y`),
  'iptables paste: an -s followed by spaces and no address': (n) => iptables(`-A X -s${' '.repeat(n)}x\n-A X -j DROP`),
  'iptables paste: an -s ! followed by spaces and no address': (n) =>
    iptables(`-A X -s !${' '.repeat(n)}!x\n-A X -j DROP`),
  'sysctl: a /proc/sys line of many colons and a line separator': (n) =>
    sysctl(`/proc/sys/net${'{"a":'.repeat(n / 5)}\u2028x`),
  'sysctl (IPVS): a key, many spaces and a line separator': (n) =>
    answer(parseIpvsSysctl, `net.ipv4.vs.conntrack =${' '.repeat(n)}x\u2028y`),
  'kube-ipvs0 addresses: many spaces and a line separator': (n) =>
    answer(parseDeviceAddresses, `7: kube-ipvs0${' '.repeat(n)}x\u2028y`),
}

/**
 * Runs one worst case of `bytes` and returns the input's length.
 * @public
 */
export function runWorstCase(name: string, bytes: number): number {
  return WORST_CASES[name](bytes)
}
