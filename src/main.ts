/**
 * The program as users run it. `npm run build` bundles this file with everything it imports into one CommonJS script,
 * dist/bundle/kproxy-doctor.cjs (esbuild, scripts/bundle.mjs; the API client in client-node.cjs beside it, required on
 * first use), which bin/run.js and bin/kubectl-kproxy_doctor run through bin/program.js (with V8's code cache); the
 * single executable holds the same program as one file (scripts/sea.mjs). It starts oclif with nothing to find on disk:
 * the package.json fields oclif reads and the commands' manifest (what `oclif manifest` writes: every command's flags,
 * arguments and help) are built into the bundle, so listing, --version and --help load no command, and each command's
 * module is initialised only when that command runs.
 */
import {Config, Errors, flush, handle, run, ux, type Command, type Hook, type Interfaces} from '@oclif/core'
import commandNotFound from './cli/hooks/command-not-found.js'
import {fromKubectlArgs} from './cli/kubectl-args.js'
import {compareNames} from './model/name-order.js'

/** What the build put in the bundle: package.json's oclif fields and each plugin's manifest. */
interface BuiltIn {
  pjson: Interfaces.PJSON
  plugins: Array<{name: string; version: string; commands: Record<string, Command.Cached>}>
}
/** BuiltIn as JSON text (esbuild's `define`; a string: an object there would be copied into every module). */
declare const KPD_BUILT_IN: string | undefined

/** Every command by its oclif id, as src/commands holds them (the build fails when the two differ). */
export const COMMANDS: Record<string, () => Promise<Command.Class>> = {
  svc: async () => (await import('./commands/svc.js')).default,
  scan: async () => (await import('./commands/scan.js')).default,
  trace: async () => (await import('./commands/trace.js')).default,
  'collect:svc': async () => (await import('./commands/collect/svc.js')).default,
  completion: async () => (await import('./commands/completion.js')).default,
  version: async () => (await import('./commands/version.js')).default,
  cleanup: async () => (await import('./commands/cleanup.js')).default,
  help: async () => (await import('@oclif/plugin-help')).commands.help,
}

/** Hooks by event: oclif loads hooks from files, and the single executable has no files. */
const HOOKS: Partial<Record<keyof Interfaces.Hooks, Hook<'command_not_found'>>> = {
  command_not_found: commandNotFound,
}

export interface RunOptions {
  /** The package's folder (oclif's `config.root`). */
  root: string
  /** Run as `kubectl kproxy-doctor`: kubectl's global flags anywhere, and help that names the command that way. */
  kubectlPlugin?: boolean
}

/** Runs one command line and settles oclif's output and exit code, as oclif's `execute` does. */
export async function runCli(argv: string[], {root, kubectlPlugin = false}: RunOptions): Promise<void> {
  if (typeof KPD_BUILT_IN === 'undefined') throw new Error('src/main.ts runs bundled: run `npm run build`')
  const builtIn = JSON.parse(KPD_BUILT_IN) as BuiltIn
  answerHooksInMemory()
  const {pjson} = builtIn
  if (kubectlPlugin) pjson.oclif.bin = 'kubectl kproxy-doctor'
  const plugins = new Map(
    builtIn.plugins.map((p, i) => [p.name, builtInPlugin(p, i === 0 ? pjson : undefined, root)] as const),
  )
  await run(kubectlPlugin ? fromKubectlArgs(argv) : argv, {root, pjson, plugins})
    .then(() => flush())
    .catch((error) => handle(error))
}

/** An oclif plugin whose manifest is in the bundle and whose commands are imported on first use. */
function builtInPlugin(
  p: BuiltIn['plugins'][number],
  rootPjson: Interfaces.PJSON | undefined,
  root: string,
): Interfaces.Plugin {
  const load = async (id: string): Promise<Command.Class> => {
    const loader = COMMANDS[id]
    if (!loader) throw new Errors.CLIError(`command ${id} not found`)
    const command = await loader()
    return Object.assign(command, {id, plugin})
  }
  const commands = Object.values(p.commands)
    .map((c) => ({...c, pluginAlias: p.name, pluginType: 'core', load: () => load(c.id)}))
    .sort((a, b) => compareNames(a.id, b.id))
  const plugin: Interfaces.Plugin = {
    _base: `${p.name}@${p.version}`,
    alias: p.name,
    name: p.name,
    version: p.version,
    pjson: rootPjson ?? ({name: p.name, version: p.version, oclif: {}} as Interfaces.PJSON),
    root: rootPjson ? root : `${root}/${p.name}`,
    isRoot: rootPjson !== undefined,
    type: 'core',
    valid: true,
    moduleType: 'module',
    hooks: {},
    commands,
    commandIDs: commands.map((c) => c.id),
    commandsDir: undefined,
    hasManifest: true,
    topics: [],
    options: {root},
    load: async () => {},
    findCommand: ((id: string) => load(id)) as Interfaces.Plugin['findCommand'],
  }
  return plugin
}

let hooksAnswered = false

/**
 * oclif's Config.runHook, for the events in HOOKS, calls the hook in memory (with the context and result oclif gives
 * a hook from a file); every other event goes to oclif as before.
 */
function answerHooksInMemory(): void {
  if (hooksAnswered) return
  hooksAnswered = true
  const fromFiles = Config.prototype.runHook
  Config.prototype.runHook = async function (this: Config, event, opts, timeout, captureErrors) {
    const hook = HOOKS[event]
    if (!hook) return fromFiles.call(this, event, opts, timeout, captureErrors)
    const rootPlugin = this.plugins.get(this.pjson.name)!
    const context: Hook.Context = {
      config: this,
      debug: () => {},
      error: (message, options = {}) => Errors.error(message, options as {exit: number}),
      exit: (code = 0) => Errors.exit(code),
      log: (message, ...args) => ux.stdout(message, ...args),
      warn: (message) => Errors.warn(message),
    }
    try {
      const result = await hook.call(context, {...(opts as {id: string}), config: this, context})
      return {successes: [{plugin: rootPlugin, result}], failures: []} as never
    } catch (error) {
      const exit = (error as {oclif?: {exit?: number}}).oclif?.exit
      if (!captureErrors && exit !== undefined && exit !== 0) throw error
      return {successes: [], failures: [{plugin: rootPlugin, error: error as Error}]} as never
    }
  } as typeof fromFiles
}
