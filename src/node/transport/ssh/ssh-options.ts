/**
 * What the doctor does with each OpenSSH client option a host's configuration gives it (`ssh -G HOST`, or the fallback
 * parser): every option that changes where, how or as whom a connection is made, or how the host is verified, is
 * honoured or refused by name; the others (what a session does once logged in, forwards the doctor never sets up, log
 * and terminal settings) are ignored. docs/access.md lists them; a new option an OpenSSH release adds is refused when
 * set (see `unknownOptionProblems`) until this table names it.
 */

/** An option's raw values: one string per occurrence (IdentityFile may come several times), as `ssh -G` prints them. */
export type RawOptions = Map<string, string[]>

type Treatment =
  /** Read into SshHostConfig (hostConfigFrom). */
  | 'honoured'
  /** Has no effect on reaching and verifying a node: not used. */
  | 'ignored'
  /** Refused unless its value says it is off (`ok`); `why` says what the doctor cannot do. */
  | {refuseUnless: (value: string) => boolean; why: string}

const off =
  (...values: string[]) =>
  (value: string) =>
    values.includes(value.toLowerCase())

/** Every option `ssh -G` prints (OpenSSH 9.x, Debian's GSSAPI key exchange patch included), by lower-case name. */
const OPTIONS: Record<string, Treatment> = {
  host: 'ignored',
  hostname: 'honoured',
  port: 'honoured',
  user: 'honoured',
  identityfile: 'honoured',
  identitiesonly: 'honoured',
  identityagent: 'honoured',
  userknownhostsfile: 'honoured',
  globalknownhostsfile: 'honoured',
  stricthostkeychecking: 'honoured',
  hostkeyalias: 'honoured',
  connecttimeout: 'honoured',
  compression: 'honoured',
  proxyjump: 'honoured',
  proxycommand: 'honoured',
  ciphers: 'honoured',
  macs: 'honoured',
  kexalgorithms: 'honoured',
  hostkeyalgorithms: 'honoured',
  addressfamily: 'honoured',
  bindaddress: 'honoured',
  serveraliveinterval: 'honoured',
  serveralivecountmax: 'honoured',
  batchmode: 'honoured',
  // Login methods the doctor has no way to use: a login that needs them fails, and the refusal names them.
  gssapiauthentication: 'honoured',
  hostbasedauthentication: 'honoured',
  pubkeyauthentication: {
    refuseUnless: off('yes', 'true', 'unbound', 'host-bound'),
    why: 'the doctor logs in with keys only',
  },
  preferredauthentications: {
    refuseUnless: (v) => v.split(',').includes('publickey'),
    why: 'the doctor logs in with keys (publickey) only',
  },
  certificatefile: {refuseUnless: off('none'), why: 'the doctor cannot present an OpenSSH certificate'},
  controlmaster: {
    refuseUnless: off('no', 'false'),
    why: "the doctor opens its own connections and cannot share OpenSSH's master connection",
  },
  controlpath: {
    refuseUnless: off('none'),
    why: "the doctor opens its own connections and cannot use OpenSSH's master connection",
  },
  pkcs11provider: {refuseUnless: off('none'), why: 'the doctor cannot use keys held by a PKCS#11 token'},
  knownhostscommand: {refuseUnless: off('none'), why: 'the doctor verifies host keys against known_hosts files only'},
  revokedhostkeys: {refuseUnless: off('none'), why: 'the doctor cannot read a revoked-keys file (KRL)'},
  gssapikeyexchange: {refuseUnless: off('no', 'false'), why: 'the doctor cannot verify a host by GSSAPI key exchange'},
  proxyusefdpass: {refuseUnless: off('no', 'false'), why: "the doctor speaks SSH over the ProxyCommand's stdio only"},
  bindinterface: {refuseUnless: () => false, why: 'the doctor cannot bind its connection to an interface'},
  canonicalizehostname: 'honoured',
  // Stricter than OpenSSH, never looser: keys must be in known_hosts (no SSHFP records, no exception for localhost).
  verifyhostkeydns: 'ignored',
  nohostauthenticationforlocalhost: 'ignored',
  checkhostip: 'ignored',
  requiredrsasize: 'ignored',
  // The doctor never writes known_hosts nor shows key art.
  hashknownhosts: 'ignored',
  updatehostkeys: 'ignored',
  visualhostkey: 'ignored',
  fingerprinthash: 'ignored',
  // Only what a connection refused or timed out decides matters; retries and socket settings are the doctor's own.
  connectionattempts: 'ignored',
  tcpkeepalive: 'ignored',
  ipqos: 'ignored',
  rekeylimit: 'ignored',
  obscurekeystroketiming: 'ignored',
  channeltimeout: 'ignored',
  // What a login session would do: the doctor runs only its own allow-listed commands, with no terminal or forwarding.
  remotecommand: 'ignored',
  requesttty: 'ignored',
  sessiontype: 'ignored',
  stdinnull: 'ignored',
  forkafterauthentication: 'ignored',
  escapechar: 'ignored',
  enableescapecommandline: 'ignored',
  sendenv: 'ignored',
  setenv: 'ignored',
  localcommand: 'ignored',
  permitlocalcommand: 'ignored',
  forwardagent: 'ignored',
  forwardx11: 'ignored',
  forwardx11trusted: 'ignored',
  forwardx11timeout: 'ignored',
  xauthlocation: 'ignored',
  localforward: 'ignored',
  remoteforward: 'ignored',
  dynamicforward: 'ignored',
  clearallforwardings: 'ignored',
  exitonforwardfailure: 'ignored',
  gatewayports: 'ignored',
  permitremoteopen: 'ignored',
  streamlocalbindmask: 'ignored',
  streamlocalbindunlink: 'ignored',
  tunnel: 'ignored',
  tunneldevice: 'ignored',
  controlpersist: 'ignored',
  // Password and keyboard prompts: the doctor never prompts (as BatchMode yes).
  passwordauthentication: 'ignored',
  kbdinteractiveauthentication: 'ignored',
  kbdinteractivedevices: 'ignored',
  challengeresponseauthentication: 'ignored',
  numberofpasswordprompts: 'ignored',
  // Key-signing details ssh2 settles by itself; certificates are refused above.
  pubkeyacceptedalgorithms: 'ignored',
  hostbasedacceptedalgorithms: 'ignored',
  casignaturealgorithms: 'ignored',
  securitykeyprovider: 'ignored',
  enablesshkeysign: 'ignored',
  addkeystoagent: 'ignored',
  usekeychain: 'ignored',
  gssapidelegatecredentials: 'ignored',
  gssapitrustdns: 'ignored',
  gssapirenewalforcesrekey: 'ignored',
  gssapikexalgorithms: 'ignored',
  gssapiclientidentity: 'ignored',
  gssapiserveridentity: 'ignored',
  // Applied by `ssh -G` itself (the hostname it prints is canonical); the fallback refuses CanonicalizeHostname.
  canonicaldomains: 'ignored',
  canonicalizefallbacklocal: 'ignored',
  canonicalizemaxdots: 'ignored',
  canonicalizepermittedcnames: 'ignored',
  loglevel: 'ignored',
  logverbose: 'ignored',
  syslogfacility: 'ignored',
  tag: 'ignored',
  ignoreunknown: 'ignored',
  include: 'ignored',
  match: 'ignored',
}

function isKnownOption(key: string): boolean {
  return key in OPTIONS
}

/** Each option set to something the doctor cannot honour, as "Option value: why". */
export function refusedOptions(raw: RawOptions): string[] {
  const out: string[] = []
  for (const [key, values] of raw) {
    const treatment = OPTIONS[key]
    if (treatment === undefined || typeof treatment === 'string') continue
    for (const value of values)
      if (!treatment.refuseUnless(value)) out.push(`${displayName(key)} ${value}: ${treatment.why}`)
  }
  return out
}

/** Options the table does not know that differ from OpenSSH's own default (`baseline`: `ssh -G` of an empty config). */
export function unknownOptionProblems(raw: RawOptions, baseline: RawOptions | undefined): string[] {
  const out: string[] = []
  for (const [key, values] of raw) {
    if (isKnownOption(key)) continue
    const byDefault = baseline?.get(key)
    if (byDefault && byDefault.join('\n') === values.join('\n')) continue
    out.push(`${key} ${values.join(' ')}: an option this version of the doctor does not know`)
  }
  return out
}

const DISPLAY: Record<string, string> = {
  certificatefile: 'CertificateFile',
  controlmaster: 'ControlMaster',
  controlpath: 'ControlPath',
  pkcs11provider: 'PKCS11Provider',
  knownhostscommand: 'KnownHostsCommand',
  revokedhostkeys: 'RevokedHostKeys',
  gssapikeyexchange: 'GSSAPIKeyExchange',
  proxyusefdpass: 'ProxyUseFdpass',
  bindinterface: 'BindInterface',
  pubkeyauthentication: 'PubkeyAuthentication',
  preferredauthentications: 'PreferredAuthentications',
}

function displayName(key: string): string {
  return DISPLAY[key] ?? key
}
