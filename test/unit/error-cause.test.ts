import assert from 'node:assert/strict'
import {readdirSync, readFileSync, statSync} from 'node:fs'
import {join} from 'node:path'
import {test} from 'node:test'
import ts from 'typescript'
import {ParseError} from '../../src/parse/parse-error.js'
import {parseRouteTable} from '../../src/parse/ip-route.js'
import {IptablesSave} from '../../src/parse/iptables-save.js'
import {BufferSource} from '../../src/parse/dump-source.js'

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? sourceFiles(path) : path.endsWith('.ts') ? [path] : []
  })
}

/**
 * Every error made inside a catch clause (or a promise's rejection handler) in src and thrown or handed on: where it
 * is made, and whether it carries what was caught as its cause.
 */
function rewraps(file: string): Array<{where: string; passesCause: boolean}> {
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true)
  const out: Array<{where: string; passesCause: boolean}> = []
  const visit = (node: ts.Node, caught: string | undefined): void => {
    if (ts.isCatchClause(node)) caught = node.variableDeclaration?.name.getText() ?? ''
    else if (ts.isFunctionLike(node) && !isRejectionHandler(node)) caught = undefined
    else if (isRejectionHandler(node)) caught = (node as ts.ArrowFunction).parameters[0]?.name.getText() ?? ''
    if (
      caught !== undefined &&
      ts.isNewExpression(node) &&
      /(Error|Unavailable|Unknown)$/.test(node.expression.getText())
    ) {
      const line = sf.getLineAndCharacterOfPosition(node.getStart()).line + 1
      out.push({
        where: `${file}:${line}: ${node.getText().replace(/\s+/g, ' ').slice(0, 80)}`,
        passesCause: caught !== '' && new RegExp(`\\bcause: ${caught}\\b`).test(node.getText()),
      })
    }
    ts.forEachChild(node, (child) => visit(child, caught))
  }
  visit(sf, undefined)
  return out
}

/** `(e) => …` given to `.catch(…)`, or as `.then(…)`'s second argument. */
function isRejectionHandler(node: ts.Node): boolean {
  const call = node.parent
  if (!(ts.isArrowFunction(node) || ts.isFunctionExpression(node)) || !call || !ts.isCallExpression(call)) return false
  if (!ts.isPropertyAccessExpression(call.expression)) return false
  const method = call.expression.name.text
  return (method === 'catch' && call.arguments[0] === node) || (method === 'then' && call.arguments[1] === node)
}

test('every error src makes out of one it caught carries it as its cause', () => {
  const found = sourceFiles('src').flatMap(rewraps)
  assert.ok(found.length > 20, `the scan finds the re-wraps (${found.length})`)
  assert.deepEqual(
    found.filter((r) => !r.passesCause).map((r) => r.where),
    [],
  )
})

test('one ParseError for every parser: the line, the reason, the input named where the message needs it, the cause', () => {
  assert.throws(
    () => parseRouteTable('10.0.0.0/8 dev eth0\nnot-a-route dev eth0'),
    (e: unknown) =>
      e instanceof ParseError &&
      e.line === 2 &&
      e.message === `ip route output line 2: ${e.reason}` &&
      /is not a destination/.test(e.reason),
  )
  const dump = IptablesSave.parse(new BufferSource(Buffer.from('*nat\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -j\nCOMMIT\n')))
  assert.throws(
    () => dump.rules('nat', 'OUTPUT'),
    (e: unknown) =>
      e instanceof ParseError &&
      e.line === 3 &&
      e.message === 'line 3: -j without a target' &&
      e.cause instanceof ParseError &&
      e.cause.line === 0 &&
      e.cause.message === '-j without a target',
  )
})
