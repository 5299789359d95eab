import assert from 'node:assert/strict'
import {execFileSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {homedir, tmpdir} from 'node:os'
import {join} from 'node:path'
import {after, test} from 'node:test'
import {
  hostConfigFrom,
  parseSshG,
  resolveSshHost,
  type SshConfigReader,
  type SshHostConfig,
} from '../../src/node/transport/ssh/ssh-config.js'
import {FallbackReader, configNamesNode, sshConfigReader} from '../../src/node/transport/ssh/ssh-config-file.js'
import {parseJump, resolveRoute} from '../../src/node/transport/ssh/ssh-route.js'
import {expandProxyCommand} from '../../src/node/transport/ssh/proxy-command.js'

const dir = mkdtempSync(join(tmpdir(), 'kpd-ssh-config-'))
after(() => rmSync(dir, {recursive: true, force: true}))

let hasSsh = true
try {
  execFileSync('ssh', ['-V'], {stdio: 'ignore'})
} catch {
  hasSsh = false
}

function write(name: string, text: string): string {
  const path = join(dir, name)
  writeFileSync(path, text)
  return path
}

const included = write('nodes.conf', 'Host node-2\n  HostName 10.0.0.2\n  User ops\n')
const CONFIG = write(
  'config',
  `# comment
Include ${included}
Host bastion
  HostName 10.0.0.1
  User jump
  Port 2201
Host node-* !node-9
  User admin
  Port 2222
  IdentityFile ~/.ssh/k8s-%h
  IdentitiesOnly yes
  ProxyJump bastion
Host node-1
  HostName override.example
  Port 22
  Compression yes
Match host 10.0.0.2
  ProxyCommand ip netns exec lab socat STDIO TCP:%h:%p
  HostKeyAlias node-two
Host *
  User fallback
  IdentityFile /etc/ssh/extra_key
  StrictHostKeyChecking=no
  UserKnownHostsFile /tmp/kh1 /tmp/kh2
  ConnectTimeout 7
`,
)

/** The fields a reader decides, without the ones that depend on this machine (agent socket, global files). */
function essentials(h: SshHostConfig) {
  return {
    hostName: h.hostName,
    port: h.port,
    user: h.user,
    identityFiles: h.identityFiles,
    identitiesOnly: h.identitiesOnly,
    userKnownHostsFiles: h.userKnownHostsFiles,
    strictHostKeyChecking: h.strictHostKeyChecking,
    hostKeyAlias: h.hostKeyAlias,
    connectTimeoutSeconds: h.connectTimeoutSeconds,
    compression: h.compression,
    proxyJump: h.proxyJump,
    proxyCommand: h.proxyCommand,
  }
}

const COMMON = {
  userKnownHostsFiles: ['/tmp/kh1', '/tmp/kh2'],
  strictHostKeyChecking: 'no',
  connectTimeoutSeconds: 7,
}

const EXPECTED = {
  'node-1': {
    ...COMMON,
    hostName: 'override.example',
    port: 2222,
    user: 'admin',
    identityFiles: [join(homedir(), '.ssh/k8s-override.example'), '/etc/ssh/extra_key'],
    identitiesOnly: true,
    hostKeyAlias: undefined,
    compression: true,
    proxyJump: ['bastion'],
    proxyCommand: undefined,
  },
  'node-2': {
    ...COMMON,
    hostName: '10.0.0.2',
    port: 2222,
    user: 'ops',
    identityFiles: [join(homedir(), '.ssh/k8s-10.0.0.2'), '/etc/ssh/extra_key'],
    identitiesOnly: true,
    hostKeyAlias: 'node-two',
    compression: false,
    proxyJump: ['bastion'],
    proxyCommand: undefined,
  },
  'node-9': {
    ...COMMON,
    hostName: 'node-9',
    port: 22,
    user: 'fallback',
    identityFiles: ['/etc/ssh/extra_key'],
    identitiesOnly: false,
    hostKeyAlias: undefined,
    compression: false,
    proxyJump: undefined,
    proxyCommand: undefined,
  },
  '10.0.0.2': {
    ...COMMON,
    hostName: '10.0.0.2',
    port: 22,
    user: 'fallback',
    identityFiles: ['/etc/ssh/extra_key'],
    identitiesOnly: false,
    hostKeyAlias: 'node-two',
    compression: false,
    proxyJump: undefined,
    proxyCommand: 'ip netns exec lab socat STDIO TCP:%h:%p',
  },
}

const readers: Array<[string, () => Promise<SshConfigReader>]> = [
  ['fallback parser', async () => new FallbackReader({file: CONFIG, timeoutMs: 5000})],
]
if (hasSsh) readers.unshift(['ssh -G', () => sshConfigReader({file: CONFIG, timeoutMs: 5000})])

for (const [name, make] of readers) {
  test(`${name}: Include, Host patterns with negation, Match host, first value wins, IdentityFile accumulates with its tokens`, async () => {
    const reader = await make()
    for (const [alias, expected] of Object.entries(EXPECTED))
      assert.deepEqual(essentials(await resolveSshHost(reader, alias)), expected, alias)
  })

  test(`${name}: ProxyJump is a route of hosts each resolved with its own configuration`, async () => {
    const reader = await make()
    const route = await resolveRoute(reader, 'node-1')
    assert.deepEqual(
      route.map((h) => [h.alias, h.user, h.hostName, h.port, h.proxyJump]),
      [
        ['bastion', 'jump', '10.0.0.1', 2201, undefined],
        ['node-1', 'admin', 'override.example', 2222, undefined],
      ],
    )
  })

  test(`${name}: a jump entry's user and port win over the hop's configuration`, async () => {
    const hop = await resolveSshHost(await make(), 'bastion', {user: 'other', port: 2022})
    assert.deepEqual([hop.user, hop.port, hop.hostName], ['other', 2022, '10.0.0.1'])
  })
}

test('two hops, and a first hop behind its own ProxyJump: the route goes on before it; a loop is refused', async () => {
  const file = write(
    'jumps',
    [
      'Host node-*',
      '  ProxyJump inner,admin@middle:2200',
      '  User ops',
      'Host inner',
      '  HostName 10.1.0.1',
      '  ProxyJump outer',
      'Host outer',
      '  HostName 10.2.0.1',
      'Host middle',
      '  ProxyJump nowhere',
      'Host loop-a',
      '  ProxyJump loop-b',
      'Host loop-b',
      '  ProxyJump loop-a',
      'Host *',
      '  User me',
      '',
    ].join('\n'),
  )
  for (const reader of [
    new FallbackReader({file, timeoutMs: 5000}),
    ...(hasSsh ? [await sshConfigReader({file, timeoutMs: 5000})] : []),
  ]) {
    const route = await resolveRoute(reader, 'node-a')
    assert.deepEqual(
      route.map((h) => `${h.user}@${h.hostName}:${h.port}`),
      ['me@10.2.0.1:22', 'me@10.1.0.1:22', 'admin@middle:2200', 'ops@node-a:22'],
      reader.by,
    )
    assert.ok(route.every((h) => h.proxyJump === undefined && h.proxyCommand === undefined))
    await assert.rejects(resolveRoute(reader, 'loop-a'), /ProxyJump loop: loop-a → loop-b → loop-a/)
  }
})

test('ProxyJump entries: user, port, ssh:// URIs and bracketed IPv6; anything else is refused', () => {
  assert.deepEqual(parseJump('admin@jump:2222'), {user: 'admin', host: 'jump', port: 2222})
  assert.deepEqual(parseJump('ssh://root@10.0.0.1:22'), {user: 'root', host: '10.0.0.1', port: 22})
  assert.deepEqual(parseJump('[fd00::1]:2200'), {user: undefined, host: 'fd00::1', port: 2200})
  assert.deepEqual(parseJump('bastion'), {user: undefined, host: 'bastion', port: undefined})
  assert.throws(() => parseJump('a@b:99999'), /bad port/)
  assert.throws(() => parseJump('a b'), /is not \[user@\]host\[:port\]/)
})

test('options the doctor cannot honour are refused by name, never dropped; cosmetic ones pass', () => {
  const base = 'hostname 10.0.0.5\nport 22\nuser root\n'
  const refused = (extra: string) => {
    try {
      hostConfigFrom('node-a', parseSshG(base + extra), {})
      return undefined
    } catch (e) {
      return (e as Error).message
    }
  }
  assert.equal(
    refused('controlmaster auto\ncontrolpath /root/.ssh/cm-abc\n'),
    "the SSH configuration for node-a sets ControlMaster auto: the doctor opens its own connections and cannot share OpenSSH's master connection; ControlPath /root/.ssh/cm-abc: the doctor opens its own connections and cannot use OpenSSH's master connection",
  )
  assert.match(refused('pkcs11provider /usr/lib/opensc-pkcs11.so\n')!, /PKCS11Provider .*PKCS#11/)
  assert.match(refused('certificatefile ~/.ssh/id_ed25519-cert.pub\n')!, /CertificateFile .*certificate/)
  assert.match(refused('gssapikeyexchange yes\n')!, /GSSAPIKeyExchange yes/)
  assert.match(refused('pubkeyauthentication no\n')!, /PubkeyAuthentication no: the doctor logs in with keys only/)
  assert.match(refused('knownhostscommand /usr/bin/fetch-keys %H\n')!, /KnownHostsCommand/)
  assert.match(refused('somenewoption 7\n')!, /somenewoption 7: an option this version of the doctor does not know/)
  for (const fine of [
    'controlmaster false\ncontrolpersist no\n',
    'serveraliveinterval 15\n',
    'forwardagent yes\nsendenv LANG LC_*\nloglevel VERBOSE\n',
    'gssapiauthentication yes\n',
    'verifyhostkeydns yes\n',
  ])
    assert.equal(refused(fine), undefined, fine)
  const h = hostConfigFrom('node-a', parseSshG(base + 'gssapiauthentication yes\nserveraliveinterval 15\n'), {})
  assert.deepEqual(h.unusableLogins, ['GSSAPIAuthentication (Kerberos)'])
  assert.equal(h.serverAliveIntervalSeconds, 15)
})

test('an option this version does not know passes when it is at OpenSSH default (the baseline of an empty config)', () => {
  const raw = parseSshG('hostname h\nsomenewoption 7\n')
  assert.doesNotThrow(() => hostConfigFrom('h', raw, {baseline: parseSshG('somenewoption 7\n')}))
  assert.throws(() => hostConfigFrom('h', raw, {baseline: parseSshG('somenewoption 3\n')}), /somenewoption 7/)
})

test('the fallback parser fails loudly where it cannot evaluate: Match exec, unknown criteria, a missing Include, CanonicalizeHostname', async () => {
  const cases: Array<[string, RegExp]> = [
    [
      'Match exec "test -f /tmp/x"\n  User x\n',
      /"Match exec test -f \/tmp\/x": without OpenSSH's ssh installed, "exec" cannot be evaluated/,
    ],
    ['Match localnetwork 10.0.0.0/8\n  User x\n', /"localnetwork" cannot be evaluated/],
    [`Include ${join(dir, 'absent.conf')}\n`, /Include .*absent\.conf: .*does not exist/],
  ]
  for (const [text, expected] of cases) {
    const file = write('bad', text)
    assert.throws(() => new FallbackReader({file, timeoutMs: 5000}), expected)
  }
  const canonical = write('canonical', 'CanonicalizeHostname yes\n')
  await assert.rejects(
    new FallbackReader({file: canonical, timeoutMs: 5000}).options('node-a'),
    /CanonicalizeHostname yes: only OpenSSH's ssh can canonicalise/,
  )
  mkdirSync(join(dir, 'conf.d'), {recursive: true})
  const globbed = write('globbed', `Include ${join(dir, 'conf.d')}/*.conf\n`)
  assert.doesNotThrow(() => new FallbackReader({file: globbed, timeoutMs: 5000}), 'a pattern matching nothing is fine')
})

test('an Include inside a Host block: its plain options belong to the block; its own blocks are refused unless Host *', async () => {
  const plain = write('plain.conf', 'User from-include\n')
  const blocks = write('blocks.conf', 'Host x\n  User x\n')
  const reader = new FallbackReader({
    file: write('in-block', `Host node-a\n  Include ${plain}\n  Port 2200\n`),
    timeoutMs: 5000,
  })
  assert.deepEqual(
    [
      (await reader.options('node-a')).get('user'),
      (await reader.options('node-b')).get('user')?.[0] === 'from-include',
    ],
    [['from-include'], false],
  )
  assert.throws(
    () => new FallbackReader({file: write('in-block2', `Host node-a\n  Include ${blocks}\n`), timeoutMs: 5000}),
    /an Include inside "Host node-a" names a file with Host or Match blocks/,
  )
  const everywhere = new FallbackReader({file: write('in-star', `Host *\n  Include ${blocks}\n`), timeoutMs: 5000})
  assert.deepEqual((await everywhere.options('x')).get('user'), ['x'])
})

test('a node is named by a Host pattern or a Match host criterion (Includes followed), not by Host *', () => {
  const names = configNamesNode({file: CONFIG})
  assert.deepEqual(
    ['node-1', 'node-2', 'node-9', 'bastion', 'other', '10.0.0.2'].map((n) => [n, names(n)]),
    [
      ['node-1', true],
      ['node-2', true],
      ['node-9', false],
      ['bastion', true],
      ['other', false],
      ['10.0.0.2', true],
    ],
  )
  assert.throws(() => configNamesNode({file: join(dir, 'nope')}), /SSH config .*nope does not exist/)
  // Which nodes a file names is read as far as it goes: a missing Include is skipped there, as OpenSSH skips it.
  const missing = write('names-missing-include', `Include ${join(dir, 'absent.conf')}\nHost node-7\n  User x\n`)
  assert.equal(configNamesNode({file: missing})('node-7'), true)
})

test('ProxyCommand tokens: plain values substituted as they are, anything a shell would read otherwise refused', () => {
  const host = (over: Partial<SshHostConfig>): SshHostConfig => ({
    alias: 'node-a',
    hostName: '10.0.0.5',
    port: 22,
    user: 'root',
    identityFiles: [],
    identitiesOnly: false,
    userKnownHostsFiles: [],
    ...over,
  })
  assert.equal(expandProxyCommand('nc -q0 "%h" %p # %n %r 100%%', host({})), 'nc -q0 "10.0.0.5" 22 # node-a root 100%')
  assert.equal(expandProxyCommand('socat - TCP:[%h]:%p', host({hostName: 'fd00::5'})), 'socat - TCP:[fd00::5]:22')
  for (const [over, token] of [
    [{hostName: '-oProxyCommand=touch /tmp/pwned'}, '%h'],
    [{hostName: 'a;reboot'}, '%h'],
    [{hostName: '$(id)'}, '%h'],
    [{alias: 'node a'}, '%n'],
    [{user: "root'"}, '%r'],
  ] as const)
    assert.throws(
      () => expandProxyCommand('nc %h %p %n %r', host(over)),
      new RegExp(`${token} would be .*not a plain host name, address, user or port: not run`),
    )
  assert.throws(() => expandProxyCommand('nc %h %x', host({})), /unknown token %x/)
})
