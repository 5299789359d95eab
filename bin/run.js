#!/usr/bin/env node
// `kproxy-doctor ...` runs this file: the program, bundled into one file by `npm run build`.
import {fileURLToPath} from 'node:url'
import {runCli} from '../dist/bundle/kproxy-doctor.js'

await runCli(process.argv.slice(2), {root: fileURLToPath(new URL('..', import.meta.url))})
