/** A read's line as it is built, from its compressed form (compressedCommandLine) where it came alone to a node. */
export const uncompressed = (l: string): string =>
  /^\{ (.*); printf '\\n#kpd-exit %d\\n' "\$\?"; \} \| gzip -1$/.exec(l)?.[1] ?? l
