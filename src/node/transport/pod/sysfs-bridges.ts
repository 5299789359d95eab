/** An interface name as the kernel allows it (IFNAMSIZ 16), and nothing that could leave /sys/class/net/NAME. */
const INTERFACE = /^[A-Za-z0-9_.@-]{1,15}$/

/** The interface names of /proc/net/dev (two header lines, then `NAME: counters…`). */
export function interfacesOfProcNetDev(text: string): string[] {
  const out: string[] = []
  for (const line of text.split('\n').slice(2)) {
    const name = line.split(':')[0]?.trim() ?? ''
    if (INTERFACE.test(name) && name !== '.' && name !== '..') out.push(name)
  }
  return out
}

/**
 * The `## hairpin` lines of the node's `network` read (`/sys/class/net/BRIDGE/brif/PORT/hairpin_mode VALUE`), from
 * `grep -H ''` over each interface's brport/hairpin_mode and brport/bridge/uevent (INTERFACE= names the bridge).
 */
export function hairpinLines(grepOutput: string): string[] {
  const hairpin = new Map<string, string>()
  const bridge = new Map<string, string>()
  for (const line of grepOutput.split('\n')) {
    const flag = /^\/sys\/class\/net\/([^/]+)\/brport\/hairpin_mode:(\d)$/.exec(line)
    if (flag) hairpin.set(flag[1], flag[2])
    const owner = /^\/sys\/class\/net\/([^/]+)\/brport\/bridge\/uevent:INTERFACE=(\S+)$/.exec(line)
    if (owner && INTERFACE.test(owner[2])) bridge.set(owner[1], owner[2])
  }
  return [...hairpin].flatMap(([port, value]) =>
    bridge.has(port) ? [`/sys/class/net/${bridge.get(port)}/brif/${port}/hairpin_mode ${value}`] : [],
  )
}
