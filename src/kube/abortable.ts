import type {ConfigurationOptions, ObservableMiddleware, RequestContext, ResponseContext} from '@kubernetes/client-node'
import {Observable} from '../vendor/client-node.js'

/** Request options whose middleware hands the abort signal to the HTTP library for every request. */
export function abortableBy(signal: AbortSignal): ConfigurationOptions<ObservableMiddleware> {
  const middleware: ObservableMiddleware = {
    pre: (context: RequestContext) => {
      context.setSignal(signal)
      return new Observable(Promise.resolve(context))
    },
    post: (response: ResponseContext) => new Observable(Promise.resolve(response)),
  }
  return {middleware: [middleware], middlewareMergeStrategy: 'append'}
}
