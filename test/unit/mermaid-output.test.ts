/**
 * `svc -o mermaid`: for every bundled example the flowchart is parsed and rendered by Mermaid itself (its browser
 * bundle from node_modules, in headless Chromium: Mermaid's parser needs a DOM, which Node lacks), and shows what the
 * report says: each node's subgraph, the breaking step with its finding code, the endpoints' Pods. Hostile names
 * (`"]-->`, `<script>`, `<img onerror>`) stay text: no element of theirs in the rendered SVG.
 */
import assert from 'node:assert/strict'
import {readdirSync} from 'node:fs'
import {createRequire} from 'node:module'
import {after, before, test} from 'node:test'
import type {Browser} from 'puppeteer-core'
import {mermaidOf} from '../../src/report/pictures.js'
import type {Report} from '../../src/report/report.js'
import {withBrowser} from '../helpers/browser.js'
import {runCli} from '../helpers/run-cli.js'

const MERMAID = createRequire(import.meta.url).resolve('mermaid/dist/mermaid.min.js')
const EXAMPLES = readdirSync('examples').filter((d) => d.endsWith('-cluster'))

interface Rendered {
  error: string | null
  svgText: string
  elements: string[]
  nodeTexts: string[]
}

let browser: Browser
let release: () => void
let closed: Promise<void>
before(async () => {
  const ready = new Promise<Browser>((resolveReady) => {
    closed = withBrowser(
      (b) =>
        new Promise<void>((r) => {
          release = r
          resolveReady(b)
        }),
    )
  })
  browser = await ready
})
after(async () => {
  release()
  await closed
})

/** Mermaid's parse and render of `text` in a fresh page: the error, or the SVG's text and the element names in it. */
async function mermaidRender(text: string): Promise<Rendered> {
  const page = await browser.newPage()
  try {
    await page.setContent('<!DOCTYPE html><html><body><div id="out"></div></body></html>')
    await page.addScriptTag({path: MERMAID})
    return await page.evaluate(async (source: string) => {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const m = (globalThis as any).mermaid
      m.initialize({startOnLoad: false, securityLevel: 'strict'})
      try {
        await m.parse(source)
        const {svg} = await m.render('picture', source)
        const out = document.getElementById('out')!
        out.innerHTML = svg
        return {
          error: null,
          svgText: out.textContent ?? '',
          elements: [...new Set([...out.querySelectorAll('*')].map((e) => e.localName))],
          nodeTexts: [...out.querySelectorAll('g.node')].map((e) => e.textContent ?? ''),
        }
      } catch (e) {
        return {error: String((e as Error).message ?? e), svgText: '', elements: [], nodeTexts: []}
      }
    }, text)
  } finally {
    await page.close()
  }
}

for (const example of EXAMPLES)
  test(`svc -o mermaid of examples/${example}: Mermaid parses and renders it, with every node and break`, async () => {
    const json = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', `examples/${example}`, '-o', 'json'])
    const report = json.json as Report
    const r = await runCli(['svc', 'web', '-n', 'shop', '--snapshot', `examples/${example}`, '-o', 'mermaid'])
    assert.equal(r.code, json.code, r.stderr)
    assert.match(r.stdout, /^---\ntitle: .*\n---\nflowchart LR\n/)
    const shown = await mermaidRender(r.stdout)
    assert.equal(shown.error, null, shown.error ?? '')
    for (const n of report.nodes) assert.ok(shown.svgText.includes(`node ${n.name}`), n.name)
    const broken = report.paths.filter((p) => p.ok === false && (p.breaksOn ?? p.node) === p.node)
    for (const p of broken)
      assert.ok(
        shown.nodeTexts.some((t) => t.startsWith(`✗ ${p.breaksAt}`) && t.includes(p.detail.slice(0, 40))),
        `${p.node} ${p.entry}: ✗ ${p.breaksAt}`,
      )
    if (report.ok) assert.ok(!shown.nodeTexts.some((t) => t.startsWith('✗')))
    const pods = new Set(report.paths.flatMap((p) => p.remote.map((h) => h.pod)).filter((p): p is string => !!p))
    for (const pod of pods)
      assert.ok(
        shown.nodeTexts.some((t) => t.startsWith(pod)),
        pod,
      )
  })

const HOSTILE = `x"]-->Z[<script>alert(1)</script><img src=x onerror=alert(2)>%%\n`

test('hostile names in a report stay text in the Mermaid picture: it parses, and no script or img element appears', async () => {
  const base = (await runCli(['svc', 'web', '-n', 'shop', '--snapshot', 'examples/broken-cluster', '-o', 'json']))
    .json as Report
  const node = base.nodes[1].name
  const swap = (s: string) => s.split(node).join(`${node}${HOSTILE}`)
  const report: Report = JSON.parse(JSON.stringify(base), (_k, v: unknown) =>
    typeof v === 'string' ? swap(v).replace(/web-b1/g, `web-b1${HOSTILE}`) : v,
  )
  const text = mermaidOf(report)
  assert.ok(!text.includes('<script'), 'no raw tag in the text')
  const shown = await mermaidRender(text)
  assert.equal(shown.error, null, shown.error ?? '')
  assert.deepEqual(
    shown.elements.filter((e) => e === 'script' || e === 'img'),
    [],
  )
  // The name shows as it was, its line break as \n.
  assert.ok(shown.svgText.includes(`node ${node}x"]-->Z[<script>alert(1)</script>`), shown.svgText.slice(0, 300))
  assert.ok(shown.nodeTexts.some((t) => t.startsWith('web-b1x"]-->Z[<script>')))
})
