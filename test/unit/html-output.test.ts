/**
 * `svc -o html` and `scan -o html`: for every bundled example the page is valid HTML (html-validate's recommended
 * rules), and headless Chromium shows what the report says without asking for anything outside the page: the
 * headline, each node's section and picture, each break with its step and reason, every finding code linked to
 * docs/checks.md; it fits a phone's width (only the pictures scroll) and a screenshot is of the size asked. Hostile
 * names (`<script>`, `<img onerror>`, quotes) stay text: the DOM has no element of theirs.
 */
import assert from 'node:assert/strict'
import {readdirSync} from 'node:fs'
import {after, before, test} from 'node:test'
import {HtmlValidate} from 'html-validate'
import type {Browser} from 'puppeteer-core'
import {htmlOf} from '../../src/report/pictures.js'
import type {Report} from '../../src/report/report.js'
import {recordRequests, withBrowser} from '../helpers/browser.js'
import {runCli} from '../helpers/run-cli.js'

const EXAMPLES = readdirSync('examples').filter((d) => d.endsWith('-cluster'))
const validator = new HtmlValidate({extends: ['html-validate:recommended']})

let browser: Browser
let release: () => void
let closed: Promise<void>
before(async () => {
  browser = await new Promise<Browser>((ready) => {
    closed = withBrowser((b) => new Promise<void>((r) => ((release = r), ready(b))))
  })
})
after(async () => {
  release()
  await closed
})

interface Seen {
  requests: string[]
  headline: string
  sections: string[]
  breaks: string[]
  codeLinks: Array<{code: string; href: string}>
  elements: string[]
  text: string
  overflow: number
  svgTitles: string[]
}

/** The page in Chromium at `width` px: what a reader sees of it, and a screenshot's PNG. */
async function open(html: string, width: number): Promise<{seen: Seen; png: Uint8Array}> {
  const page = await browser.newPage()
  try {
    await page.setViewport({width, height: 900})
    const requests = await recordRequests(page)
    await page.setContent(html, {waitUntil: 'load', timeout: 60_000})
    const seen = await page.evaluate(() => ({
      headline: document.querySelector('.headline')?.textContent ?? '',
      sections: [...document.querySelectorAll('section > h2')].map((e) => e.textContent ?? ''),
      breaks: [...document.querySelectorAll('.break')].map((e) => e.textContent ?? ''),
      codeLinks: [...document.querySelectorAll('a[href*="checks.md"] code')].map((e) => ({
        code: e.textContent ?? '',
        href: e.parentElement!.getAttribute('href') ?? '',
      })),
      elements: [...new Set([...document.querySelectorAll('*')].map((e) => e.localName))],
      text: document.body.innerText,
      overflow: document.documentElement.scrollWidth - window.innerWidth,
      svgTitles: [...document.querySelectorAll('svg > title')].map((e) => e.textContent ?? ''),
    }))
    const png = await page.screenshot({fullPage: true, type: 'png'})
    return {seen: {...seen, requests: [...requests]}, png}
  } finally {
    await page.close()
  }
}

/** A PNG's width and height, from its IHDR chunk. */
function pngSize(png: Uint8Array): {width: number; height: number} {
  const b = Buffer.from(png)
  assert.equal(b.subarray(1, 4).toString('latin1'), 'PNG')
  return {width: b.readUInt32BE(16), height: b.readUInt32BE(20)}
}

async function assertValid(html: string): Promise<void> {
  const r = await validator.validateString(html)
  const messages = r.results.flatMap((x) => x.messages.map((m) => `${m.line}:${m.column} ${m.ruleId}: ${m.message}`))
  assert.deepEqual(messages, [])
}

for (const example of EXAMPLES)
  test(`svc -o html of examples/${example}: valid, self-contained, and shows every node, break and finding`, async () => {
    const args = ['svc', 'web', '-n', 'shop', '--snapshot', `examples/${example}`]
    const report = (await runCli([...args, '-o', 'json'])).json as Report
    const r = await runCli([...args, '-o', 'html'])
    assert.equal(r.stderr, '')
    await assertValid(r.stdout)
    assert.doesNotMatch(r.stdout, /(src|href)="(https?:)?\/\//, 'no external address')
    assert.doesNotMatch(r.stdout, /<script/i)
    const {seen, png} = await open(r.stdout, 1280)
    assert.deepEqual(seen.requests, [])
    assert.equal(seen.headline, report.summary)
    assert.deepEqual(
      seen.sections.map((s) => s.split(' (')[0]),
      report.nodes.map((n) => `Node ${n.name}`),
    )
    assert.equal(seen.svgTitles.length, new Set(report.paths.map((p) => p.node)).size)
    for (const p of report.paths.filter((x) => x.ok === false && (x.breaksOn ?? x.node) === x.node))
      assert.ok(
        seen.breaks.some(
          (b) =>
            b.includes(`${p.entry} to ${p.destination}`) &&
            b.includes(`breaks at ${p.breaksAt}`) &&
            b.includes(p.detail),
        ),
        `${p.node} ${p.entry} breaks at ${p.breaksAt}`,
      )
    if (report.ok) assert.deepEqual(seen.breaks, [])
    assert.deepEqual(
      [...new Set(seen.codeLinks.map((l) => l.code))].sort(),
      [...new Set(report.findings.map((f) => f.code))].sort(),
    )
    for (const l of seen.codeLinks) assert.equal(l.href, 'docs/checks.md#finding-codes')
    const size = pngSize(png)
    assert.equal(size.width, 1280)
    assert.ok(size.height > 600 && size.height < 20_000, `height ${size.height}`)
    // A phone: the page fits its width; only the pictures scroll sideways.
    const phone = await open(r.stdout, 390)
    assert.ok(phone.seen.overflow <= 0, `the page is ${phone.seen.overflow}px wider than a phone`)
    assert.equal(pngSize(phone.png).width, 390)
  })

test('scan -o html of examples/broken-cluster: one page with the scan verdict and each Service', async () => {
  const r = await runCli(['scan', '-n', 'shop', '--snapshot', 'examples/broken-cluster', '-o', 'html'])
  const json = (await runCli(['scan', '-n', 'shop', '--snapshot', 'examples/broken-cluster', '-o', 'json'])).json as {
    summary: string
    services: Report[]
  }
  assert.equal(r.code, 1, r.stderr)
  await assertValid(r.stdout)
  const {seen} = await open(r.stdout, 1280)
  assert.deepEqual(seen.requests, [])
  assert.equal(seen.headline, json.summary)
  for (const s of json.services) assert.ok(seen.text.includes(s.summary), s.summary)
})

const HOSTILE = `"'><script>alert(1)</script><img src=x onerror=alert(2)>\n`

test('hostile names in a report stay text in the HTML page: no script or img element, the name shown as it was', async () => {
  const base = (await runCli(['svc', 'web', '-n', 'shop', '--snapshot', 'examples/broken-cluster', '-o', 'json']))
    .json as Report
  const node = base.nodes[1].name
  const report: Report = JSON.parse(JSON.stringify(base), (_k, v: unknown) =>
    typeof v === 'string'
      ? v
          .split(node)
          .join(`${node}${HOSTILE}`)
          .replace(/web-b1/g, `web-b1${HOSTILE}`)
      : v,
  )
  const html = htmlOf([report], {title: `web${HOSTILE}`, summary: null})
  await assertValid(html)
  const {seen} = await open(html, 1280)
  assert.deepEqual(seen.requests, [])
  assert.deepEqual(
    seen.elements.filter((e) => e === 'script' || e === 'img'),
    [],
  )
  assert.ok(
    seen.sections.some((s) => s.startsWith(`Node ${node}"'><script>alert(1)</script><img src=x onerror=alert(2)>\\n`)),
  )
})
