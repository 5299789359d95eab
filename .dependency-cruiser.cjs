/**
 * Layer rules: each layer may import only the layers below it (src/errors.ts from anywhere).
 *   commands -> cli -> report -> diagnosis -> checks -> model -> trace | cluster | node -> kube -> parse -> net -> util
 *   -> vendor
 * Siblings on one level (trace, cluster, node) do not import each other: what two of them need lives on a floor below
 * (kube: Kubernetes API helpers, errors, abort signals; util: async helpers), never copied.
 */
const layers = [
  ['commands'],
  ['cli'],
  ['report'],
  ['diagnosis'],
  ['checks'],
  ['model'],
  ['trace', 'cluster', 'node'],
  ['kube'],
  ['parse'],
  ['net'],
  ['util'],
  ['vendor'],
]

const folder = (names) => `^src/(${names.join('|')})/`
const forbidden = []
layers.forEach((level, index) => {
  const above = layers.slice(0, index).flat()
  if (above.length > 0) {
    forbidden.push({
      name: `${level.join('-')}-points-down`,
      comment: `${level.join(', ')} may not import ${above.join(', ')} (a layer only imports the layers below it)`,
      severity: 'error',
      from: {path: folder(level)},
      to: {path: folder(above)},
    })
  }
  for (const name of level) {
    const siblings = level.filter((other) => other !== name)
    if (siblings.length > 0) {
      forbidden.push({
        name: `${name}-not-sideways`,
        comment: `${name} may not import its siblings ${siblings.join(', ')}`,
        severity: 'error',
        from: {path: `^src/${name}/`},
        to: {path: folder(siblings)},
      })
    }
  }
})
forbidden.push(
  {
    name: 'no-circular',
    comment: 'modules may not import each other in a circle',
    severity: 'error',
    from: {},
    to: {circular: true},
  },
  {
    name: 'src-not-tests',
    comment: 'shipped code never imports tests or benchmarks',
    severity: 'error',
    from: {path: '^src/'},
    to: {path: '^(test|bench)/'},
  },
)

module.exports = {
  forbidden,
  options: {
    doNotFollow: {path: 'node_modules'},
    tsConfig: {fileName: 'tsconfig.json'},
    tsPreCompilationDeps: true,
    enhancedResolveOptions: {extensions: ['.ts', '.js']},
  },
}
