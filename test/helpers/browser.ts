import {existsSync} from 'node:fs'
import puppeteer, {type Browser, type Page} from 'puppeteer-core'

/**
 * Debian's Chromium, driven headless by puppeteer-core (which downloads no browser): scripts/install-test-deps.sh
 * installs it. CHROMIUM_PATH names another binary.
 */
const CANDIDATES = [process.env.CHROMIUM_PATH ?? '', '/usr/bin/chromium', '/usr/bin/chromium-browser']
const CHROMIUM = CANDIDATES.find((p) => p !== '' && existsSync(p))

/**
 * A headless Chromium for `fn`, closed after it (killed by its process id if closing fails). No name resolves in it
 * (`--host-resolver-rules`): a page that asks for anything outside itself gets nothing.
 */
export async function withBrowser<T>(fn: (browser: Browser) => Promise<T>): Promise<T> {
  if (!CHROMIUM)
    throw new Error('no Chromium: run scripts/install-test-deps.sh (Debian package chromium) or set CHROMIUM_PATH')
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    timeout: 60_000,
    protocolTimeout: 120_000,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--host-resolver-rules=MAP * ~NOTFOUND'],
  })
  try {
    return await fn(browser)
  } finally {
    const child = browser.process()
    await browser.close().catch(() => child?.kill('SIGKILL'))
  }
}

/** Every request a page makes after this call, by URL (the page's own content set with setContent makes none). */
export async function recordRequests(page: Page): Promise<string[]> {
  const urls: string[] = []
  await page.setRequestInterception(true)
  page.on('request', (r) => {
    urls.push(r.url())
    void r.abort()
  })
  return urls
}
