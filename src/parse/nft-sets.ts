/** The tables `nft list sets` shows: every table's "table FAMILY NAME {" header (its sets follow it). */
export function tablesListed(text: string): Array<{family: string; name: string}> {
  return [...text.matchAll(/^table (\S+) (\S+) \{/gm)].map((m) => ({family: m[1], name: m[2]}))
}
