import js from '@eslint/js'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  {ignores: ['dist/**', 'node_modules/**', 'examples/**', 'coverage/**']},
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {parserOptions: {projectService: true, tsconfigRootDir: import.meta.dirname}},
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', {argsIgnorePattern: '^_', varsIgnorePattern: '^_'}],
      eqeqeq: ['error', 'always'],
      'no-console': ['error', {allow: ['error', 'warn']}],
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    // node:test's test() and describe() return promises the runner awaits itself.
    rules: {'no-console': 'off', '@typescript-eslint/no-floating-promises': 'off'},
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    languageOptions: {
      globals: {process: 'readonly', console: 'readonly', module: 'writable', require: 'readonly', URL: 'readonly'},
    },
  },
  {
    // bin/ is CommonJS (bin/package.json): Node.js starts a CommonJS main file without its ES module loader.
    files: ['bin/*.js'],
    languageOptions: {sourceType: 'commonjs', globals: {__dirname: 'readonly'}},
    rules: {'@typescript-eslint/no-require-imports': 'off'},
  },
)
