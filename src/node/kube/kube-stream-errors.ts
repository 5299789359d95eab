/** Why a pods/exec or pods/portforward call to the Kubernetes API did not give a result. */
export class KubeStreamError extends Error {
  override name = 'KubeStreamError'
  constructor(
    message: string,
    /** The HTTP status the API server refused the upgrade with, when it did. */
    readonly httpStatus?: number,
  ) {
    super(message)
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
  ) {
    super(`forbidden: this user may not ${verb} ${resource} in the namespace "${namespace}"`, 403)
  }
}

export class KubeNotFoundError extends KubeStreamError {
  override name = 'KubeNotFoundError'
  constructor(
    readonly namespace: string,
    readonly pod: string,
  ) {
    super(`pod ${namespace}/${pod} was not found`, 404)
  }
}

export class KubeTimeoutError extends KubeStreamError {
  override name = 'KubeTimeoutError'
  constructor(
    readonly what: string,
    readonly timeoutMs: number,
  ) {
    super(`${what} did not finish within ${timeoutMs} ms`)
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
