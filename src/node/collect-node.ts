import {closeSync, mkdirSync, openSync, writeFileSync, writeSync} from 'node:fs'
import {join} from 'node:path'
import {NODE_FILES, writeNodeError} from './bundle.js'
import {parseLookupOutput, queryOverStream, type DnsAnswer} from './dns-probe.js'
import {httpGetOnNode} from './http-over-ssh.js'
import {parseHealthz, parseMetrics, type KubeProxyStatus} from '../parse/kube-proxy-status.js'
import {commandLine, dnsLookupCommand} from './node-commands.js'
import type {SshHostConfig} from './ssh-config.js'
import {SshSession, type SshOptions} from './ssh-session.js'

export interface DnsQuestion {
  name: string
  server: string
}

/** Reads one node over SSH into dir (iptables-save.txt, network.txt, dns.json), or writes error.txt. Never throws. */
export async function collectNode(host: SshHostConfig, dir: string, opts: SshOptions, dns?: DnsQuestion): Promise<void> {
  mkdirSync(dir, {recursive: true})
  let session: SshSession | undefined
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`node did not answer within ${(opts.timeoutMs * 3) / 1000}s`)), opts.timeoutMs * 3)
  })
  try {
    await Promise.race([
      (async () => {
        session = await SshSession.connect(host, opts)
        await readAll(session, dir, dns)
      })(),
      deadline,
    ])
  } catch (e) {
    writeNodeError(dir, (e as Error).message)
  } finally {
    clearTimeout(timer)
    session?.close()
  }
}

async function readAll(session: SshSession, dir: string, dns?: DnsQuestion): Promise<void> {
  const uid = await session.exec(commandLine('uid', false))
  const isRoot = uid.stdout.toString().trim() === '0'
  const path = join(dir, NODE_FILES.iptablesSave)
  const fd = openSync(path, 'w', 0o600)
  let res
  try {
    res = await session.exec(commandLine('iptablesSave', isRoot), (chunk) => writeSync(fd, chunk))
  } finally {
    closeSync(fd)
  }
  if (res.code !== 0) {
    if (/password is required|a terminal is required/.test(res.stderr)) throw new Error('sudo on the node wants a password: allow "sudo -n iptables-save" for the SSH user, or log in as root')
    throw new Error(`iptables-save exited ${res.code}: ${res.stderr.trim().split('\n')[0] || 'no message'}`)
  }
  // nftables: kube-proxy's nftables mode, and leftovers of it; a node without nft simply has none.
  // JSON first (the stable machine format); the text form where this nft has no -j.
  let nft = await session.exec(commandLine('nftRulesetJson', isRoot))
  if (nft.code !== 0 || !nft.stdout.toString().trimStart().startsWith('{')) nft = await session.exec(commandLine('nftRuleset', isRoot))
  if (nft.code === 0) writeFileSync(join(dir, NODE_FILES.nftRuleset), nft.stdout)
  for (const [cmd, file] of [
    ['iptablesLegacySave', NODE_FILES.iptablesLegacySave],
    ['iptablesNftSave', NODE_FILES.iptablesNftSave],
  ] as const) {
    const r = await session.exec(commandLine(cmd, isRoot))
    if (r.code === 0 && r.stdout.length > 0) writeFileSync(join(dir, file), r.stdout)
  }
  // IPVS mode: written only where ipvsadm answers (IPVS nodes); the rest goes with it.
  const ipvs = await session.exec(commandLine('ipvsadm', isRoot))
  if (ipvs.code === 0) {
    writeFileSync(join(dir, NODE_FILES.ipvsadm), ipvs.stdout)
    for (const [cmd, file] of [
      ['ipsetSave', NODE_FILES.ipset],
      ['kubeIpvs0', NODE_FILES.kubeIpvs0],
      ['sysctls', NODE_FILES.sysctl],
    ] as const) {
      const r = await session.exec(commandLine(cmd, isRoot))
      if (r.stdout.length > 0) writeFileSync(join(dir, file), r.stdout)
    }
  }
  const net = await session.exec(commandLine('network', isRoot))
  writeFileSync(join(dir, NODE_FILES.network), net.stdout)
  if (dns) writeFileSync(join(dir, NODE_FILES.dns), JSON.stringify(await askDns(session, dns), null, 2) + '\n')
  writeFileSync(join(dir, NODE_FILES.kubeProxy), JSON.stringify(await askKubeProxy(session), null, 2) + '\n')
}

/** kube-proxy's own view: /proxyMode and /metrics on 127.0.0.1:10249, /healthz on :10256 (the defaults). */
async function askKubeProxy(session: SshSession): Promise<KubeProxyStatus> {
  const out: KubeProxyStatus = {}
  const get = (port: number, path: string) => httpGetOnNode(session, port, path, 3000)
  try {
    const r = await get(10249, '/proxyMode')
    if (r.status === 200) out.proxyMode = r.body.trim()
    else out.proxyModeError = `HTTP ${r.status}`
  } catch (e) {
    out.proxyModeError = (e as Error).message
  }
  try {
    const r = await get(10256, '/healthz')
    out.healthz = parseHealthz(r.status, r.body)
  } catch (e) {
    out.healthzError = (e as Error).message
  }
  try {
    const r = await get(10249, '/metrics')
    if (r.status === 200) out.metrics = parseMetrics(r.body)
    else out.metricsError = `HTTP ${r.status}`
  } catch (e) {
    out.metricsError = (e as Error).message
  }
  return out
}

async function askDns(session: SshSession, q: DnsQuestion): Promise<DnsAnswer> {
  const base = {name: q.name, server: q.server}
  let forwardError: string
  try {
    const stream = await session.forward(q.server, 53)
    try {
      const r = await queryOverStream(stream, q.name, 3000)
      return {...base, ...r, method: 'DNS over TCP through an SSH port forward'}
    } catch (e) {
      return {...base, addresses: [], method: 'DNS over TCP through an SSH port forward', error: (e as Error).message}
    }
  } catch (e) {
    forwardError = (e as Error).message
  }
  const r = await session.exec(dnsLookupCommand(q.name, q.server))
  if (r.code === 127) return {...base, addresses: [], method: 'none', error: `${forwardError}; and the node has neither dig nor nslookup: run "nslookup ${q.name} ${q.server}" there by hand`}
  const addresses = parseLookupOutput(r.stdout.toString())
  return {...base, addresses, method: 'dig/nslookup on the node', error: addresses.length === 0 ? r.stderr.trim().split('\n')[0] || 'no answer' : undefined}
}
