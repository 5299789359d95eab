import ssh2 from 'ssh2'

/** How many times a pair is made again before giving up (one try in about 256 gives an unreadable ed25519 pair). */
const TRIES = 16

/**
 * A key pair in OpenSSH's formats, made by ssh2 and checked readable. ssh2's keygen drops an ed25519 public key's
 * leading zero bytes (mscdex/ssh2#1513, #1390), so about one ed25519 pair in 256 is one its own parser refuses: a test
 * server given such a host key, or a client given such a key, failed or hung now and then. Such a pair is made again.
 */
export function sshKeyPair(type: 'ed25519' | 'rsa'): {private: string; public: string} {
  for (let i = 0; i < TRIES; i++) {
    const pair =
      type === 'rsa' ? ssh2.utils.generateKeyPairSync('rsa', {bits: 2048}) : ssh2.utils.generateKeyPairSync('ed25519')
    if (!(ssh2.utils.parseKey(pair.private) instanceof Error) && !(ssh2.utils.parseKey(pair.public) instanceof Error))
      return pair
  }
  throw new Error(`ssh2 made no readable ${type} key pair in ${TRIES} tries`)
}
