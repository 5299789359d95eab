// The part of the `ws` package (a dependency of @kubernetes/client-node) this project uses; @types/ws is not installed.
// Delete this file if @types/ws is added to devDependencies.
declare module 'ws' {
  import type {EventEmitter} from 'node:events'
  import type {ClientRequest, IncomingMessage} from 'node:http'
  import type {Duplex} from 'node:stream'

  class WebSocket extends EventEmitter {
    static readonly CONNECTING: 0
    static readonly OPEN: 1
    static readonly CLOSING: 2
    static readonly CLOSED: 3
    constructor(address: string, protocols?: string | string[], options?: Record<string, unknown>)
    readonly protocol: string
    readonly readyState: 0 | 1 | 2 | 3
    send(data: Buffer | string, cb?: (err?: Error) => void): void
    close(code?: number, reason?: string): void
    terminate(): void
    on(event: 'open', listener: () => void): this
    on(event: 'message', listener: (data: Buffer, isBinary: boolean) => void): this
    on(event: 'close', listener: (code: number, reason: Buffer) => void): this
    on(event: 'error', listener: (err: Error) => void): this
    on(event: 'unexpected-response', listener: (req: ClientRequest, res: IncomingMessage) => void): this
    off(event: string, listener: (...args: never[]) => void): this
  }

  interface ServerOptions {
    noServer?: boolean
    handleProtocols?: (protocols: Set<string>, request: IncomingMessage) => string | false
  }

  class WebSocketServer extends EventEmitter {
    constructor(options: ServerOptions)
    handleUpgrade(
      request: IncomingMessage,
      socket: Duplex,
      head: Buffer,
      callback: (ws: WebSocket, request: IncomingMessage) => void,
    ): void
    close(cb?: (err?: Error) => void): void
  }

  export {WebSocket, WebSocketServer, type ServerOptions}
  export default WebSocket
}
