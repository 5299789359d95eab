/**
 * The parts of @kubernetes/client-node this tool runs. `npm run build` replaces this file's compiled output with one
 * file bundling them (esbuild): the package is some 2,500 ES modules, and importing them one by one took about 0.9 s
 * of every live run, where the bundle loads in about 0.2 s. Compiled by tsc alone, it re-exports the package as is.
 */
export {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  DiscoveryV1Api,
  KubeConfig,
  NetworkingV1Api,
  Observable,
  Watch,
} from '@kubernetes/client-node'
