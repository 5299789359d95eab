#!/usr/bin/env node
// `kproxy-doctor ...` runs this file: the program, bundled into one file by `npm run build` (bin/program.js loads it).
import {runProgram} from './program.js'

await runProgram(process.argv.slice(2))
