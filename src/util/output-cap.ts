/**
 * The most one command run on a node may print (stdout and stderr together; for a compressed read, also once
 * decompressed), whatever the way in: past it the read stops and the node is reported unreadable, so that a flooding
 * node or a gzip bomb cannot take the doctor's memory.
 */
export const COMMAND_OUTPUT_CAP_BYTES = 32 * 1024 * 1024

/**
 * The cap on a whole dump (iptables-save, nft list ruleset) read through a Pod: kube-proxy's iptables-save at 12,000
 * Services of 10 endpoints is 36.5 MiB (bench/generate.ts), past the command cap, which made such a node unreadable.
 * 256 MiB holds about seven times that and still bounds what one read can take.
 */
export const DUMP_OUTPUT_CAP_BYTES = 256 * 1024 * 1024

/** "32 MiB", for messages. */
export function capText(bytes: number = COMMAND_OUTPUT_CAP_BYTES): string {
  return bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes} bytes`
}
