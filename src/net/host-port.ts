import {parseIp} from './address.js'

/** `ip:port`, with IPv6 in brackets (`[fd00::1]:80`), as kube-proxy, iptables and ipvsadm print endpoints. */
export function joinHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`
}

/** Splits `ip:port` or `[ipv6]:port`; undefined when there is no valid port or the host is no address. */
export function splitHostPort(text: string): {host: string; port: number} | undefined {
  const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(text) ?? /^([^:]+):(\d{1,5})$/.exec(text)
  if (!m) return undefined
  const port = Number(m[2])
  if (port > 65535 || !parseIp(m[1])) return undefined
  return {host: m[1], port}
}
