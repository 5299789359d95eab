/**
 * The bare baseline: a plain Node process that only reads the dump and splits it into lines (the floor any reader
 * pays), loading nothing of the CLI or its framework. Prints {"ms", "maxRssBytes"} like measure.ts.
 */
import {readFileSync} from 'node:fs'

const started = performance.now()
const lines = readFileSync(process.argv[2], 'utf8').split('\n')
if (lines.length < 2) throw new Error('empty dump')
process.stderr.write(
  `\n${JSON.stringify({ms: performance.now() - started, maxRssBytes: process.resourceUsage().maxRSS * 1024})}\n`,
)
