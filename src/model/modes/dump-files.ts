import {DiagnosisError} from '../../errors.js'
import {familyOf} from '../../net/address.js'
import {
  BufferSource,
  FileSource,
  MAX_STREAMED_DUMP_BYTES,
  MAX_TEXT_DUMP_BYTES,
  readDumpBytes,
  type DumpSource,
} from '../../parse/dump-source.js'
import {IpsetState} from '../../parse/ipset-save.js'
import {IptablesSave} from '../../parse/iptables-save.js'
import {parseIpvsadm, type VirtualServer} from '../../parse/ipvsadm.js'
import {parseNftDump} from '../../parse/nft-dump.js'
import {NftRuleset} from '../../parse/nft-ruleset.js'
import {ParseError} from '../../parse/parse-error.js'
import {
  normaliseIptablesPaste,
  normaliseNftPaste,
  nothingToNormaliseNft,
  nothingToNormaliseNftBytes,
  type NormalisedPaste,
} from '../../parse/paste-normalise.js'
import type {TraceResult} from '../../trace/types.js'

/**
 * The dump files `trace` walks without a node, each one flag of the command (`trace --iptables-save FILE`, "-" for
 * stdin): what a mode's walk is built from (see TracerFromFiles in mode.ts). A file two modes read (iptables-save: the
 * iptables mode's rules, the IPVS mode's glue) is one flag.
 */
export const DUMP_FILES = {
  'iptables-save': 'iptables-save dump to walk ("-" reads stdin)',
  nft: '`nft list ruleset` text or `nft -j list ruleset` JSON to walk ("-" reads stdin)',
  'ipset-save': '`ipset save` output, for -m set matches',
  ipvsadm: '`ipvsadm -Sn` or `ipvsadm -Ln` output: trace an IPVS node (with --iptables-save for its iptables glue)',
} as const

export type DumpFile = keyof typeof DUMP_FILES

/** The files given on the command line, by flag (a path, or "-" for stdin). */
export type GivenFiles = Partial<Record<DumpFile, string>>

/** How a file is named in an error: "stdin" for "-". */
const fileName = (file: string) => (file === '-' ? 'stdin' : file)

/** Inputs up to this size are read whole and normalised as pastes; larger ones are streamed as iptables-save. */
const MAX_PASTE_BYTES = 64 << 20

/** An iptables-save dump given to `trace`, and the paste it was normalised from (when it was read whole). */
export interface IptablesFile {
  file: string
  dump: IptablesSave
  paste?: NormalisedPaste
}

/** An input that holds nothing (0 bytes, or only white space): one line naming it, before any parser guesses at it. */
function refuseEmpty(file: string, text: string, output: string): void {
  if (text.trim() !== '') return
  const held = text.length === 0 ? 'is empty' : `holds only white space (${text.length} bytes)`
  throw new DiagnosisError(`${fileName(file)}: the input ${held}: no ${output} output was read`)
}

/**
 * Reads an iptables-save dump: a paste (up to 64 MiB, normalised: a copied terminal, a `-S` listing, a lone chain) or a
 * dump streamed as the node printed it. `dst` is the packet's destination (a paste's family follows it).
 */
export function readIptablesFile(file: string, dst: string): IptablesFile {
  let source: DumpSource
  try {
    source = file === '-' ? new BufferSource(readDumpBytes('-', MAX_STREAMED_DUMP_BYTES)) : new FileSource(file)
  } catch (e) {
    throw new DiagnosisError(`cannot read ${file}: ${(e as Error).message}`, {cause: e})
  }
  if (source.size > MAX_STREAMED_DUMP_BYTES)
    throw new DiagnosisError(
      `${file} is larger than ${MAX_STREAMED_DUMP_BYTES / 2 ** 30} GiB: not a dump this tool reads`,
    )
  let paste: NormalisedPaste | undefined
  // Pastes are small; a dump too large to be one is streamed as iptables-save, as the node printed it.
  if (source.size <= MAX_PASTE_BYTES) {
    const text = source.read(0, source.size).toString('latin1')
    source.close()
    refuseEmpty(file, text, 'iptables-save')
    try {
      paste = normaliseIptablesPaste(text, familyOf(dst))
    } catch (e) {
      throw new DiagnosisError(`${fileName(file)}: ${(e as Error).message}`, {cause: e})
    }
    source = new BufferSource(Buffer.from(paste.text, 'latin1'))
  }
  try {
    return {file, dump: IptablesSave.parse(source, {requireTables: true, acceptCut: paste !== undefined}), paste}
  } catch (e) {
    throw new DiagnosisError(
      `${fileName(file)}: ${(e instanceof ParseError ? inputLineError(e, paste) : (e as Error)).message}`,
      {cause: e},
    )
  }
}

/** A rule parsed when the walk reached it and found broken: the error names the file and the input's line. */
export function walkError(e: unknown, file: string, paste?: NormalisedPaste): unknown {
  return e instanceof ParseError
    ? new DiagnosisError(`${fileName(file)}: ${inputLineError(e, paste).message}`, {cause: e})
    : e
}

/** The walk with the steps naming the input's lines (a line the normaliser added, a hook to the entry chain, is 0). */
export function withInputLines(result: TraceResult, f: IptablesFile): TraceResult {
  const paste = f.paste
  if (!paste) return result
  const tables = new Set(f.dump.tableNames())
  return {
    ...result,
    outcomes: result.outcomes.map((o) => ({
      ...o,
      steps: o.steps.map((s) => (tables.has(s.table) && s.line > 0 ? {...s, line: paste.originalLine(s.line)} : s)),
    })),
  }
}

/** The error with the line of the input, not of the normalised text. */
function inputLineError(e: ParseError, paste: NormalisedPaste | undefined): ParseError {
  if (!paste || e.line <= 0) return e
  const line = paste.originalLine(e.line)
  return line > 0
    ? new ParseError(line, e.reason, {cause: e})
    : new ParseError(0, `${e.reason} (in a line the normaliser added)`, {cause: e})
}

/** `nft list ruleset` (text or JSON; a paste is normalised), with what the normaliser assumed. */
export function readNftFile(file: string): {ruleset: NftRuleset; notes: string[]} {
  let text
  try {
    const streamed = file === '-' ? undefined : streamNftFile(file)
    if (streamed) return {ruleset: streamed, notes: []}
    text = readDumpBytes(file).toString('utf8')
  } catch (e) {
    throw new DiagnosisError(`${fileName(file)}: ${(e as Error).message}`, {cause: e})
  }
  refuseEmpty(file, text, 'nft list ruleset')
  try {
    const paste = normaliseNftPaste(text)
    return {ruleset: parseNftDump(paste.text), notes: paste.notes}
  } catch (e) {
    throw new DiagnosisError(`${fileName(file)}: ${(e as Error).message}`, {cause: e})
  }
}

/** Thrown to stop indexing a file that the paste normaliser would change. */
class NotPlainRuleset extends Error {}

/**
 * `nft list ruleset` text as the node printed it, indexed straight from the file (which stays open: each chain is read
 * when a walk reaches it); undefined for anything else (JSON, a paste the normaliser would change: read whole).
 */
function streamNftFile(file: string): NftRuleset | undefined {
  const source = new FileSource(file)
  try {
    if (source.size > MAX_TEXT_DUMP_BYTES)
      throw new Error(
        `${file} is larger than ${Math.round(MAX_TEXT_DUMP_BYTES / 2 ** 20)} MiB: not a dump this tool reads`,
      )
    const head = source.read(0, Math.min(source.size, 4096))
    let i = 0
    while (i < head.length && (head[i] === 32 || (head[i] >= 9 && head[i] <= 13))) i++
    // JSON, or white space beyond ASCII before the first word: the whole text's way.
    if (i === head.length || head[i] === 0x7b || head[i] >= 0x80) {
      source.close()
      return undefined
    }
    return NftRuleset.index(source, {
      beforeChunk: (chunk) => {
        if (!nothingToNormaliseNftBytes(chunk)) throw new NotPlainRuleset()
      },
    })
  } catch (e) {
    // A text the normaliser would change is read whole, and so is one that a later piece shows to be a paste: the
    // normaliser first, as for any paste (its fault may be one the normaliser takes away).
    const paste = e instanceof NotPlainRuleset || (e instanceof ParseError && !nothingToNormaliseNft(wholeText(source)))
    source.close()
    if (paste) return undefined
    throw e
  }
}

function wholeText(source: FileSource): string {
  return source.read(0, source.size).toString('utf8')
}

/** `ipset save` output; none given: no set. */
export function readIpsetFile(file: string | undefined): IpsetState | undefined {
  if (!file) return undefined
  try {
    return IpsetState.parse(readDumpBytes(file).toString('utf8'))
  } catch (e) {
    throw new DiagnosisError(`${file}: ${(e as Error).message}`, {cause: e})
  }
}

/** `ipvsadm -Sn` or `-Ln` output, with at least one virtual server. */
export function readIpvsadmFile(file: string): VirtualServer[] {
  let servers
  try {
    servers = parseIpvsadm(readDumpBytes(file).toString('utf8'))
  } catch (e) {
    throw new DiagnosisError(`${fileName(file)}: ${(e as Error).message}`, {cause: e})
  }
  if (servers.length === 0) throw new DiagnosisError(`${file}: no virtual server in the ipvsadm output`)
  return servers
}
