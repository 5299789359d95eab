// The algorithm lists ssh2 speaks (its protocol constants); @types/ssh2 does not declare this module.
declare module 'ssh2/lib/protocol/constants.js' {
  const constants: {
    SUPPORTED_CIPHER: string[]
    SUPPORTED_MAC: string[]
    SUPPORTED_KEX: string[]
    SUPPORTED_SERVER_HOST_KEY: string[]
  }
  export default constants
}
