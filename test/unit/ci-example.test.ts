import {test} from 'node:test'
import assert from 'node:assert/strict'
import {readFileSync} from 'node:fs'
import {resolve} from 'node:path'
import {parse} from 'yaml'
import {runCli} from '../helpers/run-cli.js'

const ROOT = resolve(import.meta.dirname, '../../..')
const WORKFLOW = readFileSync(resolve(ROOT, 'examples/ci/github-actions.yaml'), 'utf8')

/** Every shell command of the workflow's `run:` steps, continuation lines joined, split at && ; | and new lines. */
function shellCommands(workflow: {jobs: Record<string, {steps: Array<{run?: string}>}>}): string[][] {
  return Object.values(workflow.jobs)
    .flatMap((job) => job.steps.flatMap((s) => (s.run ? [s.run] : [])))
    .flatMap((run) => run.replaceAll('\\\n', ' ').split(/\n|&&|;|\|/))
    .map((c) => c.replace(/#.*/, '').trim())
    .filter(Boolean)
    .map((c) => c.split(/\s+/))
}

/** The arguments of each kproxy-doctor invocation (run directly or through npx), up to a redirection. */
function invocations(commands: string[][]): string[][] {
  return commands.flatMap((words) => {
    let i = 0
    if (words[0] === 'npx') for (i = 1; words[i]?.startsWith('-'); i++);
    if (words[i] !== 'kproxy-doctor') return []
    const args = words.slice(i + 1)
    const redirect = args.findIndex((a) => a.startsWith('>') || a.startsWith('<') || a === '2>&1')
    return [redirect < 0 ? args : args.slice(0, redirect)]
  })
}

test('examples/ci/github-actions.yaml is YAML, and each kproxy-doctor in it is a scan using only flags scan --help lists', async () => {
  const workflow = parse(WORKFLOW)
  const steps: Array<{uses?: string; run?: string}> = workflow.jobs['kproxy-doctor'].steps
  assert.ok(steps.some((s) => s.uses?.startsWith('helm/kind-action@')))
  assert.ok(
    steps.some(
      (s) => s.uses?.startsWith('mikepenz/action-junit-report@') || s.uses?.startsWith('actions/upload-artifact@'),
    ),
  )

  const help = await runCli(['scan', '--help'])
  assert.equal(help.code, 0, help.stderr)
  const listed = new Set([...help.stdout.matchAll(/(?<![\w-])(--?[a-zA-Z][\w-]*)/g)].map((m) => m[1]))
  assert.ok(listed.has('--via') && listed.has('-o') && listed.has('--fail-on'), [...listed].join(' '))

  const calls = invocations(shellCommands(workflow))
  assert.ok(calls.length > 0, 'the workflow runs kproxy-doctor')
  for (const args of calls) {
    assert.equal(args[0], 'scan', args.join(' '))
    const flags = args.slice(1).filter((a) => a.startsWith('-'))
    for (const flag of flags)
      assert.ok(listed.has(flag.split('=')[0]), `${flag} is not a flag of scan --help (${args.join(' ')})`)
    // The values given are ones the help accepts.
    const value = (name: string) => args[args.indexOf(name) + 1]
    assert.equal(value('--via'), 'kube-proxy')
    assert.equal(value('-o'), 'junit')
  }
  const scan = steps.find((s) => s.run?.includes('kproxy-doctor scan'))!
  assert.match(scan.run!, /> report\.xml\s*$/, 'the JUnit report goes to the file the next steps publish')

  // kproxy-doctor is not on the npm registry yet: the job installs a tarball built with npm pack, before the scan.
  const installs = shellCommands(workflow).filter(
    (w) => w.includes('kproxy-doctor') || w.some((x) => /kproxy-doctor-/.test(x)),
  )
  assert.ok(!installs.some((w) => w[0] === 'npx' || (w[0] === 'npm' && w.includes('exec'))), 'not run through npx')
  const install = steps.findIndex((s) => /^npm install -g \.\/ci\/kproxy-doctor-\*\.tgz$/.test(s.run?.trim() ?? ''))
  assert.ok(install >= 0 && install < steps.indexOf(scan), 'the packed tarball is installed before the scan')
  assert.match(WORKFLOW, /^# .*npm ci && npm pack/m, 'the header says how to build the tarball')
})

test('docs/ci.md shows the same workflow as examples/ci/github-actions.yaml, under "CI smoke checks"', () => {
  const doc = readFileSync(resolve(ROOT, 'docs/ci.md'), 'utf8')
  const section = doc.slice(doc.indexOf('\n## CI smoke checks\n'))
  assert.ok(section.length < doc.length, 'docs/ci.md has a "CI smoke checks" section')
  const block = /```yaml\n([\s\S]*?)```/.exec(section)
  assert.equal(block?.[1], WORKFLOW)
})
