import {existsSync, readdirSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import {parseBridgeState} from '../../src/parse/bridge-state.js'
import {parseCniResults} from '../../src/parse/cni-results.js'
import {parseConntrackList} from '../../src/parse/conntrack.js'
import {BufferSource} from '../../src/parse/dump-source.js'
import {parseRouteGet, parseRouteTable} from '../../src/parse/ip-route.js'
import {IpsetState} from '../../src/parse/ipset-save.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {parseDeviceAddresses, parseIpvsadm} from '../../src/parse/ipvsadm.js'
import {parseMetrics} from '../../src/parse/kube-proxy-status.js'
import {parseElements} from '../../src/parse/nft-elements.js'
import {parseNftDump} from '../../src/parse/nft-dump.js'
import {normaliseIptablesPaste, normaliseNftPaste} from '../../src/parse/paste-normalise.js'
import {parseSysctl} from '../../src/parse/sysctl.js'

/**
 * Whitespace a parser meets in real input that is not a space or a newline: a vertical tab, a form feed, a no-break
 * space (what copying from a web page or a chat inserts), the Unicode line and paragraph separators, a byte order
 * mark, a tab, a carriage return.
 */
export const ODD_WHITESPACE = ['\v', '\f', '\u00a0', '\u2028', '\u2029', '\ufeff', '\t', '\r']

/** Every file of one name in the example bundles. */
function exampleFiles(name: string): string[] {
  const out: string[] = []
  for (const bundle of readdirSync('examples')) {
    const nodes = join('examples', bundle, 'nodes')
    if (!existsSync(nodes)) continue
    for (const node of readdirSync(nodes)) {
      const file = join(nodes, node, name)
      if (existsSync(file)) out.push(readFileSync(file, 'utf8'))
    }
  }
  return out
}

const ELEMENTS = '10.96.7.7 . tcp . 80 comment "shop/web:http" : goto svc-x, 10.0.0.0/8 timeout 1h expires 59m'
const CONNTRACK =
  'tcp      6 431999 ESTABLISHED src=10.244.1.5 dst=10.96.10.10 sport=40000 dport=80 src=10.244.2.10 dst=10.244.1.5 sport=8080 dport=40000 [ASSURED] mark=0 use=1'
const ROUTES =
  'default via 10.200.0.1 dev eth0 proto dhcp src 10.200.0.11 metric 100\n10.244.1.0/24 dev cbr0 scope link'
const METRICS = 'kubeproxy_sync_proxy_rules_last_timestamp_seconds 1.7e+09\n'

/** Each parser with the inputs it reads: the examples' dumps and small samples in the tools' formats. */
function parsers(): Array<{name: string; inputs: string[]; parse: (text: string) => unknown}> {
  const nft = [
    ...exampleFiles('nft-ruleset.txt'),
    ...readdirSync('test/fixtures/nft').map((f) => readFileSync(join('test/fixtures/nft', f), 'utf8')),
  ]
  const iptables = exampleFiles('iptables-save.txt')
  return [
    {
      name: 'iptables-save',
      inputs: iptables,
      parse: (t) => IptablesSave.parse(new BufferSource(Buffer.from(t)), {requireTables: true}),
    },
    {name: 'iptables paste', inputs: iptables, parse: (t) => normaliseIptablesPaste(t, 4)},
    {name: 'nft (text and JSON)', inputs: nft, parse: (t) => parseNftDump(t)},
    {name: 'nft paste', inputs: nft, parse: (t) => parseNftDump(normaliseNftPaste(t).text)},
    {name: 'nft element list', inputs: [ELEMENTS], parse: (t) => parseElements(t)},
    {name: 'ipvsadm', inputs: exampleFiles('ipvsadm.txt'), parse: (t) => parseIpvsadm(t)},
    {name: 'kube-ipvs0 addresses', inputs: exampleFiles('kube-ipvs0.txt'), parse: (t) => parseDeviceAddresses(t)},
    {name: 'ipset save', inputs: exampleFiles('ipset.txt'), parse: (t) => IpsetState.parse(t)},
    {name: 'sysctl', inputs: exampleFiles('sysctl.txt'), parse: (t) => parseSysctl(t)},
    {name: 'network (bridges)', inputs: exampleFiles('network.txt'), parse: (t) => parseBridgeState(t)},
    {name: 'CNI results', inputs: exampleFiles('cni-results.txt'), parse: (t) => parseCniResults(t)},
    {name: 'conntrack', inputs: [CONNTRACK], parse: (t) => parseConntrackList(t)},
    {name: 'ip route', inputs: [ROUTES], parse: (t) => parseRouteTable(t)},
    {name: 'ip route get', inputs: [ROUTES.split('\n')[0]], parse: (t) => parseRouteGet(t)},
    {name: 'kube-proxy metrics', inputs: [METRICS], parse: (t) => parseMetrics(t)},
  ]
}

/** The ways one character goes into an input: in place of every space, after every comma, at each line's ends. */
function variants(text: string, ch: string): string[] {
  return [
    text.replaceAll(' ', ch),
    text.replaceAll(', ', `,${ch}`).replaceAll('{ ', `{${ch}`),
    text.replaceAll(' ', ` ${ch}`),
    text.replaceAll('\n', `${ch}\n${ch}`),
    ch + text,
  ]
}

/** An error a parser means (a parse error naming what is wrong), not one it ran into (TypeError, RangeError, …). */
function isParseError(e: unknown): boolean {
  return (
    e instanceof Error &&
    ![Error, TypeError, RangeError, ReferenceError, SyntaxError].some((internal) => e.constructor === internal) &&
    !e.message.includes('\n')
  )
}

/**
 * Runs every parser over every variant of its inputs with `ch` in them. Returns what went wrong, one line each: an
 * internal error, or an error message of several lines. (An input that loops or allocates without end never returns:
 * run this in a bounded worker.)
 * @public
 */
export function parseWithOddWhitespace(ch: string): string[] {
  const wrong: string[] = []
  for (const p of parsers()) {
    if (p.inputs.length === 0) wrong.push(`${p.name}: no sample input found`)
    for (const [i, input] of p.inputs.entries())
      for (const [v, text] of variants(input, ch).entries()) {
        try {
          p.parse(text)
        } catch (e) {
          if (!isParseError(e))
            wrong.push(`${p.name}, input ${i}, variant ${v}: ${(e as Error).constructor.name}: ${(e as Error).message}`)
        }
      }
  }
  return wrong
}
