#!/usr/bin/env node
// `kproxy-doctor ...` runs this file: the program, bundled into one file by `npm run build` (bin/program.js loads it).
// CommonJS (bin/package.json): Node.js starts a CommonJS main file without its ES module loader, which is part of every run.
require('./program.js').runProgram(process.argv.slice(2))
