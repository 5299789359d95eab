import assert from 'node:assert/strict'
import {createHmac} from 'node:crypto'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {test} from 'node:test'
import {checkKnownHosts, knownHostsName} from '../../src/node/transport/ssh/known-hosts.js'
import {commandLine, NODE_COMMANDS} from '../../src/node/node-commands.js'
import {dnsLookupCommand} from '../../src/node/read/command-arguments.js'

test('known_hosts: plain, [host]:port, hashed entries, mismatch and unknown', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpd-kh-'))
  try {
    const key = Buffer.from('fake-host-key-blob')
    const other = Buffer.from('another-key')
    const salt = Buffer.from('0123456789abcdef0123')
    const hashed = `|1|${salt.toString('base64')}|${createHmac('sha1', salt).update('hashed.example').digest('base64')}`
    const file = join(dir, 'known_hosts')
    writeFileSync(
      file,
      [
        `node-a,10.0.0.5 ssh-ed25519 ${key.toString('base64')}`,
        `[127.0.0.1]:2201 ssh-ed25519 ${key.toString('base64')}`,
        `${hashed} ssh-ed25519 ${key.toString('base64')}`,
        `node-b ssh-ed25519 ${other.toString('base64')}`,
      ].join('\n'),
    )
    assert.equal(checkKnownHosts([file], 'node-a', key).status, 'match')
    assert.equal(checkKnownHosts([file], '10.0.0.5', key).status, 'match')
    assert.equal(checkKnownHosts([file], knownHostsName('127.0.0.1', 2201), key).status, 'match')
    assert.equal(checkKnownHosts([file], 'hashed.example', key).status, 'match')
    assert.equal(checkKnownHosts([file], 'node-b', key).status, 'mismatch')
    assert.equal(checkKnownHosts([file], 'node-c', key).status, 'unknown')
    assert.equal(
      checkKnownHosts([file], knownHostsName('127.0.0.1', 2202), key).status,
      'unknown',
      '[ and ] are literal, not a character class',
    )
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
})

test('node commands: read-only allow-list; sudo -n only where root is needed; DNS command refuses odd input', () => {
  assert.deepEqual(Object.keys(NODE_COMMANDS).sort(), [
    'ciliumServiceList',
    'ciliumServiceListOld',
    'cniResults',
    'hasGzip',
    'ip6tablesLegacySave',
    'ip6tablesNftSave',
    'ip6tablesSave',
    'ip6tablesVersion',
    'ipsetSave',
    'iptablesLegacySave',
    'iptablesNftSave',
    'iptablesSave',
    'iptablesVersion',
    'ipvsadm',
    'kubeIpvs0',
    'network',
    'nftRuleset',
    'nftRulesetJson',
    'nftSets',
    'routeTable',
    'routeTable6',
    'sysctls',
    'uid',
  ])
  assert.equal(commandLine('iptablesSave', false), 'sudo -n iptables-save')
  assert.equal(commandLine('iptablesSave', true), 'iptables-save')
  assert.equal(commandLine('network', false), NODE_COMMANDS.network)
  for (const line of Object.values(NODE_COMMANDS))
    assert.doesNotMatch(
      line,
      /\b(rm|mv|tee|iptables -[ADIFXNRP]|iptables-restore|ip (link|addr|route) (add|del|set)|sysctl -w|[^2]>\s*\/)/,
    )
  assert.match(
    dnsLookupCommand('web.shop.svc.cluster.local', '10.96.0.10', 'A'),
    /dig \+short \+tcp \+time=2 \+tries=1 web\.shop\.svc\.cluster\.local A @10\.96\.0\.10;.* nslookup -vc -timeout=2 -type=A web\.shop\.svc\.cluster\.local 10\.96\.0\.10;/,
  )
  assert.match(
    dnsLookupCommand('web.shop.svc.cluster.local', 'fd00:10:96::a', 'AAAA'),
    /dig \+short \+tcp \+time=2 \+tries=1 web\.shop\.svc\.cluster\.local AAAA @fd00:10:96::a;.* -type=AAAA web\.shop\.svc\.cluster\.local fd00:10:96::a;/,
  )
  for (const [name, server, type] of [
    ['web; rm -rf /', '10.96.0.10', 'A'],
    ['web.shop', '10.96.0.10; reboot', 'A'],
    ['web.shop', 'fd00::a;id', 'AAAA'],
    ['web.shop', '::::', 'AAAA'],
    ['$(id)', '1.2.3.4', 'A'],
    ['web.shop', '10.96.0.10', 'AAAA; reboot'],
    ['web.shop', '10.96.0.10', 'MX'],
  ])
    assert.throws(() => dnsLookupCommand(name, server, type as 'A'), /refusing to build a DNS command/)
})
