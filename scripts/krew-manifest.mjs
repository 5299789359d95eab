// Fills the krew manifest template (plugins/kproxy-doctor.template.yaml) for one release and prints it:
//   node scripts/krew-manifest.mjs --version 0.2.0 --base-url https://github.com/OWNER/REPO/releases/download/v0.2.0 \
//     --checksums SHA256SUMS [--homepage URL]
// SHA256SUMS: `sha256sum` output for the release's assets. Every {{URI:asset}} becomes base-url/asset and every
// {{SHA256:asset}} that asset's checksum; an asset missing from SHA256SUMS, or any field left unfilled, is an error
// (a manifest never names a checksum nobody computed).
import {readFileSync} from 'node:fs'
import {resolve} from 'node:path'
import {parseArgs} from 'node:util'

const repo = resolve(import.meta.dirname, '..')
const {values} = parseArgs({
  options: {
    version: {type: 'string'},
    'base-url': {type: 'string'},
    checksums: {type: 'string'},
    homepage: {type: 'string'},
  },
})
for (const required of ['version', 'base-url', 'checksums']) if (!values[required]) fail(`--${required} is required`)

const sums = new Map()
for (const line of readFileSync(values.checksums, 'utf8').split('\n').filter(Boolean)) {
  const m = /^([0-9a-f]{64}) [ *](.+)$/.exec(line)
  if (!m) fail(`not a sha256sum line: ${line}`)
  sums.set(m[2].replace(/^.*\//, ''), m[1])
}

const template = readFileSync(resolve(repo, 'plugins/kproxy-doctor.template.yaml'), 'utf8')
const manifest = template
  .replace(
    /^# TEMPLATE[\s\S]*?\n(?=apiVersion:)/,
    '# krew plugin manifest, made by scripts/krew-manifest.mjs for this release.\n',
  )
  .replaceAll('{{VERSION}}', `v${values.version.replace(/^v/, '')}`)
  .replaceAll('{{HOMEPAGE}}', values.homepage ?? values['base-url'].replace(/\/releases\/download\/.*$/, ''))
  .replace(/\{\{URI:([^}]+)\}\}/g, (_, asset) => `${values['base-url'].replace(/\/$/, '')}/${asset}`)
  .replace(
    /\{\{SHA256:([^}]+)\}\}/g,
    (_, asset) => sums.get(asset) ?? fail(`no checksum for ${asset} in ${values.checksums}`),
  )
const left = /\{\{[^}]*\}\}/.exec(manifest)
if (left) fail(`unfilled field ${left[0]}`)
process.stdout.write(manifest)

function fail(message) {
  process.stderr.write(`krew-manifest: ${message}\n`)
  process.exit(2)
}
