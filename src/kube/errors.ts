/** Why a pods/exec or pods/portforward call to the Kubernetes API did not give a result. */
export class KubeStreamError extends Error {
  override name = 'KubeStreamError'
  /** The HTTP status the API server refused the upgrade with, when it did. */
  readonly httpStatus?: number

  constructor(message: string, options: {httpStatus?: number; cause?: unknown} = {}) {
    super(message, options.cause === undefined ? undefined : {cause: options.cause})
    this.httpStatus = options.httpStatus
  }
}

/** RBAC (or another authorizer) refused: `verb` on `resource` (e.g. create pods/exec) in `namespace` is needed. */
export class KubeForbiddenError extends KubeStreamError {
  override name = 'KubeForbiddenError'
  constructor(
    readonly verb: string,
    readonly resource: string,
    readonly namespace: string,
    readonly serverMessage: string,
    options: {cause?: unknown} = {},
  ) {
    super(`forbidden: this user may not ${verb} ${resource} in the namespace "${namespace}"`, {
      httpStatus: 403,
      ...options,
    })
  }
}

export class KubeNotFoundError extends KubeStreamError {
  override name = 'KubeNotFoundError'
  constructor(
    readonly namespace: string,
    readonly pod: string,
  ) {
    super(`pod ${namespace}/${pod} was not found`, {httpStatus: 404})
  }
}

export class KubeTimeoutError extends KubeStreamError {
  override name = 'KubeTimeoutError'
  constructor(
    readonly what: string,
    readonly timeoutMs: number,
    options: {cause?: unknown} = {},
  ) {
    super(`${what} did not finish within ${timeoutMs} ms`, options)
  }
}

export class KubeAbortedError extends KubeStreamError {
  override name = 'KubeAbortedError'
  constructor(readonly what: string) {
    super(`${what} was cancelled`)
  }
}

/** The container's image has no such program (the runtime could not start it). */
export class KubeCommandNotFoundError extends KubeStreamError {
  override name = 'KubeCommandNotFoundError'
  constructor(
    readonly command: string,
    readonly serverMessage: string,
  ) {
    super(`the container has no "${command}" command`)
  }
}

/** The kubelet could not reach the port inside the pod (its error channel said why). */
export class KubePortForwardError extends KubeStreamError {
  override name = 'KubePortForwardError'
  constructor(
    readonly port: number,
    readonly serverMessage: string,
    /** Nothing listened on the port (connection refused). */
    readonly refused: boolean,
  ) {
    super(`port-forward to port ${port} failed: ${serverMessage}`)
  }
}
