/**
 * A timeout that fires `ms` from now, but only after the I/O that arrived meanwhile has been handled. Node runs expired
 * timers before it polls for I/O: when the process was not scheduled for a while (a loaded machine, a busy CI runner),
 * a plain timer would fire first and count as timed out an answer that is already waiting in its socket.
 */
export function lateTimeout(ms: number): {expired: Promise<'timeout'>; cancel: () => void} {
  let timer: NodeJS.Timeout | undefined
  let immediate: NodeJS.Immediate | undefined
  const expired = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => (immediate = setImmediate(() => resolve('timeout'))), ms)
  })
  return {
    expired,
    cancel: () => {
      clearTimeout(timer)
      if (immediate) clearImmediate(immediate)
    },
  }
}
