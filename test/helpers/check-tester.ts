import assert from 'node:assert/strict'
import {describe, test} from 'node:test'
import {diagnose, type DiagnoseOptions} from '../../src/diagnosis/diagnose.js'
import {offlineCluster, type OfflineOptions} from './offline-cluster.js'
import {assertPastes, assertReadOnly} from './command-pastes.js'
import {CHECK_FAMILIES, type CheckFamilyName} from './check-families.js'
import {assertKubectlParses, kubectlInstalled} from './kubectl-parse.js'

/** One expected finding: code, node ("-" when cluster-wide), severity. */
type Expected = [code: string, node: string, severity: 'error' | 'warning' | 'info']

export interface CheckCase {
  name: string
  /** The cluster and nodes as read, built from the lab's healthy state. */
  state: OfflineOptions
  options?: DiagnoseOptions
  /** EVERY finding the whole diagnosis must produce: one more or one fewer fails the case. */
  findings: Expected[]
  /**
   * The exact steps of some findings, keyed "CODE node" ("-" when cluster-wide): the check's argv stages, the fix (its
   * argv stages, prose, and what it changes), and the prose.
   */
  fixes?: Record<string, ExpectedSteps>
  /** What some findings' messages must say, keyed "CODE node" as `fixes`. */
  messages?: Record<string, RegExp[]>
}

interface ExpectedSteps {
  check: string[][] | null
  fix: {argv: string[][] | null; text: string | null; changes: 'node' | 'cluster'; node: string | null} | null
  text: string | null
}

/** Codes seen firing in any case run so far in this process (one check case file). */
const firedCodes = new Set<string>()
/** Every kubectl command (argv as JSON) a check or fix of those cases printed. */
const kubectlCommands = new Set<string>()
const noteKubectl = (argv: string[][] | null | undefined) => {
  for (const stage of argv ?? []) if (stage[0] === 'kubectl') kubectlCommands.add(JSON.stringify(stage))
}

const key = (e: Expected) => e.join(' ')

/**
 * ESLint's RuleTester, for checks: each case is a state of the cluster and the exact list of findings the full
 * diagnosis gives for it, so a check that starts firing where it should not fails someone's case.
 */
export function checkTester(title: string, cases: CheckCase[]): void {
  describe(title, () => {
    for (const c of cases) {
      test(c.name, () => {
        const {cluster, observations} = offlineCluster(c.state)
        const findings = diagnose(cluster, observations, c.options).findings
        for (const f of findings) {
          firedCodes.add(f.code)
          noteKubectl(f.check?.argv)
          noteKubectl(f.fix?.argv)
        }
        const got = findings
          .map((f): Expected => [f.code, f.node ?? '-', f.severity])
          .map(key)
          .sort()
        if (process.env.KPD_PRINT_FINDINGS)
          console.log(
            `## ${c.name}\n${JSON.stringify(findings.map((f) => [f.code, f.node ?? '-', f.severity]))}\n${findings.map((f) => `   ${f.code} ${f.node}: ${f.message}`).join('\n')}`,
          )
        assert.deepEqual(got, c.findings.map(key).sort())
        for (const f of findings) {
          assert.ok(
            f.message.length > 0 && (f.check !== null || f.fix !== null || f.text !== null),
            `${f.code} needs a message and a check, a fix or a text`,
          )
          if (f.check) {
            assertPastes(f.check.command, f.check.argv, `${c.name}: ${f.code} check`)
            assertReadOnly(f.check.argv, `${c.name}: ${f.code} check`)
          }
          if (f.fix) {
            assert.ok(f.fix.command !== null || f.fix.text !== null, `${f.code}: a fix with neither command nor text`)
            assert.equal(f.fix.command === null, f.fix.argv === null, `${f.code}: fix command and argv go together`)
            if (f.fix.command) assertPastes(f.fix.command, f.fix.argv!, `${c.name}: ${f.code} fix`)
            assert.equal(f.fix.changes === 'node', f.fix.node !== null, `${f.code}: a node fix names its node`)
          }
        }
        for (const [key, fix] of Object.entries(c.fixes ?? {})) {
          const f = findings.find((x) => `${x.code} ${x.node ?? '-'}` === key)
          assert.ok(f, `no finding ${key}`)
          assert.deepEqual(
            {
              check: f.check?.argv ?? null,
              fix: f.fix && {argv: f.fix.argv, text: f.fix.text, changes: f.fix.changes, node: f.fix.node},
              text: f.text,
            },
            fix,
            key,
          )
        }
        for (const [key, patterns] of Object.entries(c.messages ?? {})) {
          const f = findings.find((x) => `${x.code} ${x.node ?? '-'}` === key)
          assert.ok(f, `no finding ${key}`)
          for (const p of patterns) assert.match(f.message, p, key)
        }
      })
    }
  })
}

/**
 * A check case file's tables (test/unit/checks-FAMILY.test.ts), then its last test: every code CHECK_FAMILIES gives
 * the family fired in one of the cases above, so a check whose cases stopped making it fire fails here.
 */
export function checkFamily(family: CheckFamilyName, tables: () => void): void {
  describe(`${family} checks`, () => {
    tables()
    test(`every ${family} code fires in at least one case above`, () => {
      const never = CHECK_FAMILIES[family].filter((code) => !firedCodes.has(code))
      assert.deepEqual(never, [], `codes no case makes fire: ${never.join(', ')}`)
    })
    test(
      `every kubectl command the ${family} cases print parses as kubectl reads it`,
      {skip: !kubectlInstalled && 'kubectl is not installed'},
      (t) => {
        if (kubectlCommands.size === 0) return t.skip('no case of this family prints a kubectl command')
        for (const command of kubectlCommands) assertKubectlParses(JSON.parse(command) as string[], command)
      },
    )
  })
}
