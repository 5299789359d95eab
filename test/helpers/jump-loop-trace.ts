import v8 from 'node:v8'
import {BufferSource} from '../../src/parse/dump-source.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {parseNftDump} from '../../src/parse/nft-dump.js'
import {IptablesTracer} from '../../src/trace/iptables-tracer.js'
import {NftTracer} from '../../src/trace/nft-tracer.js'
import type {Packet} from '../../src/trace/types.js'
import {jumpLoopIptables, jumpLoopNft, type JumpLoopShape} from './fuzz-generate.js'
import {Prng} from './seeded.js'

const PACKET: Packet = {
  src: '10.244.1.5',
  dst: '10.96.10.10',
  proto: 'tcp',
  dport: 80,
  sport: 40000,
  inIface: 'cbr0',
  outIface: 'eth0',
}

/** What a trace of a jump-loop dump kept. */
export interface JumpLoopTrace {
  bytes: number
  outcomes: number
  steps: number
  loops: number
  stopped: number
  probability: number
  jsonBytes: number
  /** The heap the finished trace holds (its outcomes and steps), after a full collection. */
  retainedMb: number
}

/** A full collection where the process allows one (node --expose-gc), so heap sizes count only what is live. */
const collect = () => (globalThis as {gc?: () => void}).gc?.()

/**
 * Traces one packet through a generated jump-loop dump (seed, nftables or iptables, the shape) and says what the
 * trace kept: outcomes, steps, how many end in a loop or a budget stop, the summed share, the JSON's size and the
 * heap it holds. Run it in a child with a small heap (bounded-run.ts): the peak is then bounded by the child's limit.
 * @public
 */
export function traceJumpLoop(seed: number, nft: boolean, shape: JumpLoopShape): JumpLoopTrace {
  const r = new Prng(seed)
  const text = nft ? jumpLoopNft(r, shape) : jumpLoopIptables(r, shape)
  const tracer = nft
    ? new NftTracer(parseNftDump(text), {localAddresses: ['10.200.0.11']})
    : new IptablesTracer(IptablesSave.parse(new BufferSource(Buffer.from(text))), {localAddresses: ['10.200.0.11']})
  collect()
  const before = v8.getHeapStatistics().used_heap_size
  const result = tracer.trace(PACKET)
  collect()
  const retained = v8.getHeapStatistics().used_heap_size - before
  return {
    bytes: text.length,
    outcomes: result.outcomes.length,
    steps: result.outcomes.reduce((a, o) => a + o.steps.length, 0),
    loops: result.outcomes.filter((o) => /^a loop: /.test(o.reason ?? '')).length,
    stopped: result.outcomes.filter((o) => /^stopped at /.test(o.reason ?? '')).length,
    probability: result.outcomes.reduce((a, o) => a + o.probability, 0),
    jsonBytes: JSON.stringify(result).length,
    retainedMb: Math.max(0, retained) / 2 ** 20,
  }
}
