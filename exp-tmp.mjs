import * as esbuild from 'esbuild'
import {readFileSync} from 'node:fs'
const variant = process.argv[2]
const builtIn = JSON.parse(readFileSync('/tmp/kpd/builtin.json', 'utf8'))
const base = {entryPoints: {'kproxy-doctor': 'src/main.ts'}, bundle: true, platform: 'node', target: 'node20', external: ['typescript','cpu-features','*.node','bufferutil','utf-8-validate'], define: {KPD_BUILT_IN: JSON.stringify(JSON.stringify(builtIn))}, logLevel: 'error', legalComments: 'none'}
const esmBanner = {js: "import {createRequire as kpdCreateRequire} from 'node:module'; const require = kpdCreateRequire(import.meta.url);"}
const v = {
  esm: {format: 'esm', banner: esmBanner},
  esmMin: {format: 'esm', banner: esmBanner, minify: true, keepNames: true},
  esmSplit: {format: 'esm', banner: esmBanner, splitting: true},
  esmSplitMin: {format: 'esm', banner: esmBanner, splitting: true, minify: true, keepNames: true},
  cjs: {format: 'cjs', define: {...base.define, 'import.meta.url': 'kpdUrl'}, banner: {js: "const kpdUrl = require('node:url').pathToFileURL(__filename).href;"}, outExtension: {'.js': '.cjs'}},
  cjsMin: {format: 'cjs', minify: true, keepNames: true, define: {...base.define, 'import.meta.url': 'kpdUrl'}, banner: {js: "const kpdUrl = require('node:url').pathToFileURL(__filename).href;"}, outExtension: {'.js': '.cjs'}},
  cjsLive: {format: 'cjs', external: [...base.external, '*/vendor/client-node.js', 'ssh2', 'ws'], define: {...base.define, 'import.meta.url': 'kpdUrl'}, banner: {js: "const kpdUrl = require('node:url').pathToFileURL(__filename).href;"}, outExtension: {'.js': '.cjs'}},
  cjsLiveMin: {format: 'cjs', minify: true, keepNames: true, external: [...base.external, '*/vendor/client-node.js', 'ssh2', 'ws'], define: {...base.define, 'import.meta.url': 'kpdUrl'}, banner: {js: "const kpdUrl = require('node:url').pathToFileURL(__filename).href;"}, outExtension: {'.js': '.cjs'}},
}[variant]
const r = await esbuild.build({...base, ...v, define: v.define ?? base.define, outdir: `/tmp/kpd/v/${variant}`, metafile: true})
for (const [f, o] of Object.entries(r.metafile.outputs)) console.log(f, o.bytes, Object.keys(o.imports.filter ? {} : {}).length, o.imports.filter(i => i.external).map(i => i.path).join(' '))
