/** `iptables -V` ("iptables v1.8.9 (nf_tables)"): its first line, whether the nf_tables backend answers, its release. */
export function parseIptablesVersion(text: string): {
  line: string
  nfTables: boolean
  release?: [number, number, number]
} {
  const line = text.trim().split('\n')[0]
  const m = /v(\d+)\.(\d+)\.(\d+)/.exec(line)
  return {
    line,
    nfTables: /\(nf_tables\)/.test(line),
    ...(m ? {release: [Number(m[1]), Number(m[2]), Number(m[3])] as [number, number, number]} : {}),
  }
}
