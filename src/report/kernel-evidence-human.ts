import type {ChalkInstance} from 'chalk'
import type {Report} from './report.js'
import type {KernelTraceItem} from './kernel-trace.js'
import {wrapProse} from './width.js'

function mark(item: KernelTraceItem, c: ChalkInstance): string {
  if (item.agreesWithWalk === true) return c.green('✓')
  if (item.agreesWithWalk === false) return c.red('✗')
  return c.yellow('?')
}

/** The rule counters of one probed address: what they say, then a line per rule of the walk the probes moved. */
function counterLines(counters: NonNullable<KernelTraceItem['counters']>, width: number): string[] {
  return [
    ...wrapProse(`rule counters: ${counters.note}`, width, '      ', '        '),
    ...counters.moved.flatMap((m) =>
      wrapProse(
        `moved +${m.packets} packet${m.packets === 1 ? '' : 's'} (${m.probes} probe${m.probes === 1 ? '' : 's'} through it): ${m.table} ${m.chain}: ${m.rule}`,
        width,
        '        ',
        '          ',
      ),
    ),
  ]
}

const MATCHED = {'source-port': 'by source port', 'time-window': 'by the seconds since the probes'} as const

/**
 * The human report's "Kernel evidence": per node, one line per probed Service address (the endpoints the kernel's DNAT
 * chose, replied or not, agrees with the walk ✓/✗, ? where nothing could be compared), and the nodes where conntrack
 * could not be read, never with a ✓. Nothing when no probe ran.
 */
export function renderKernelEvidence(
  r: Pick<Report, 'kernelTrace' | 'notChecked' | 'probes'>,
  c: ChalkInstance,
  width = Number.POSITIVE_INFINITY,
): string[] {
  const unread = r.notChecked.filter(
    (n) =>
      (n.check === 'kernel-evidence' || n.check === 'kernel-trace' || n.check === 'rule-counters') && n.node !== null,
  )
  const traced = r.kernelTrace.some((i) => i.rules.length > 0)
  // A snapshot has no probes of its own: what it shows is what its bundle recorded (none: said in coverage only).
  const recordedAt = r.kernelTrace.find((i) => i.recordedAt)?.recordedAt
  const replay = !r.probes.ran
  if (replay && !recordedAt) return []
  if (r.kernelTrace.length === 0 && unread.length === 0) return []
  const matched = [...new Set(r.kernelTrace.flatMap((i) => (i.matchedBy ? [MATCHED[i.matchedBy]] : [])))]
  const when = replay
    ? `replayed from the bundle: recorded at collection time${recordedAt ? `, ${recordedAt}` : ''}, not a fresh read; conntrack as read right after the probes then`
    : 'conntrack, read right after the probes'
  const lines = [
    '',
    ...wrapProse(
      `${c.bold('Kernel evidence')} (${when}${matched.length > 0 ? `; entries matched ${matched.join(' or ')}` : ''}${traced ? "; netfilter's own trace of each probe, --kernel-trace" : ''})`,
      width,
      '',
      '  ',
    ),
  ]
  const nodes = [...new Set([...r.kernelTrace.map((i) => i.node), ...unread.map((n) => n.node!)])].sort()
  for (const node of nodes) {
    lines.push(`  ${node}`)
    for (const n of unread.filter((u) => u.node === node))
      lines.push(
        ...wrapProse(
          n.check === 'kernel-evidence' ? `kernel evidence: ${n.reason}` : n.reason,
          width,
          '    ? ',
          '      ',
        ).map((l) => c.yellow(l)),
      )
    for (const item of r.kernelTrace.filter((i) => i.node === node)) {
      const verdict =
        item.agreesWithWalk === true
          ? 'agrees with the walk'
          : item.agreesWithWalk === false
            ? 'disagrees'
            : 'not compared'
      const busy = item.others > 0 ? ' (other traffic among the entries: evidence, not proof)' : ''
      // The trace verdict: the last rule netfilter says the probe's first packet matched.
      const last = item.rules.at(-1)
      const trace = last
        ? ` [traced: ${item.rules.length} rules, last ${last.table} ${last.chain} verdict ${last.verdict}]`
        : ''
      lines.push(
        ...wrapProse(
          `${item.kind} ${item.target} (${item.port}): ${verdict}${busy}${trace}: ${item.detail}`,
          width,
          `    ${mark(item, c)} `,
          '      ',
        ),
      )
      if (item.counters) lines.push(...counterLines(item.counters, width))
    }
  }
  return lines
}
