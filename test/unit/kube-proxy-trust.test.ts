/**
 * Issue #32 item 7: a Pod labelled k8s-app=kube-proxy is anyone's to create. The debug Pod runs only kube-proxy's
 * DaemonSet's image, pinned by the digest its running Pod reports, said before anything is created; without such a
 * DaemonSet nothing is created unless --debug-image names an image. The kube-proxy transport execs only into a running,
 * host-network Pod that DaemonSet owns on that node. Served by the test API server (real HTTPS on loopback).
 */
import assert from 'node:assert/strict'
import {after, before, test} from 'node:test'
import {loadKubeConfig} from '../../src/cluster/live-source.js'
import {kubeProxyImage, podsByNode} from '../../src/node/transport/pod/find-pod.js'
import {TRANSPORTS, TransportUnavailable} from '../../src/node/transport/transports.js'
import {KUBE_PROXY_DIGEST, kubeProxyDaemonSetObject, kubeProxyPodObject} from '../fixtures/api-objects.js'
import {LabApiServer} from '../lab/apiserver.js'

const TOKEN = 'kpd-trust-token'
const api = new LabApiServer({token: TOKEN})
before(() => api.start())
after(() => api.stop())

const SELECTOR = {namespace: 'kube-system', labelSelector: 'k8s-app=kube-proxy'}
const PINNED = `registry.k8s.io/kube-proxy:v1.33.0@${KUBE_PROXY_DIGEST}`
const kubeConfig = () => loadKubeConfig({kubeconfig: api.writeKubeconfig(), timeoutMs: 5000}).kc

/** A Pod anyone with `create pods` makes: kube-proxy's label, no owner, an image of their choosing, on the host network. */
function impostor(node: string) {
  const p = kubeProxyPodObject(node, true)
  return {
    ...p,
    metadata: {...p.metadata, name: `evil-${node}`, ownerReferences: []},
    spec: {...p.spec, containers: [{name: 'kube-proxy', image: 'evil.example/root:latest'}]},
  }
}

function serve(pods: object[], daemonSets: object[] = [kubeProxyDaemonSetObject()]): void {
  api.set('pods', pods as never)
  api.set('daemonsets', daemonSets as never)
}

test("the debug Pod's image: the DaemonSet's, pinned by its running Pod's digest; an impostor Pod's never", async () => {
  serve([impostor('node-a'), kubeProxyPodObject('node-b', true)])
  const found = await kubeProxyImage(kubeConfig(), SELECTOR, 5000)()
  assert.deepEqual(found, {
    image: PINNED,
    where: "kube-proxy's DaemonSet kube-system/kube-proxy, digest from its running Pod kube-system/kube-proxy-bx7k2",
  })
  serve([impostor('node-a')])
  assert.deepEqual(await kubeProxyImage(kubeConfig(), SELECTOR, 5000)(), {
    reason:
      "no Pod of kube-system -l k8s-app=kube-proxy is owned by a DaemonSet of kube-system to take kube-proxy's image from: give one with --debug-image",
  })
  // An owner reference to a DaemonSet that is not there (or has another uid) is no owner.
  serve([kubeProxyPodObject('node-b', true)], [])
  assert.ok('reason' in (await kubeProxyImage(kubeConfig(), SELECTOR, 5000)()))
  const otherUid = {...kubeProxyDaemonSetObject(), metadata: {...kubeProxyDaemonSetObject().metadata, uid: 'x'}}
  serve([kubeProxyPodObject('node-b', true)], [otherUid])
  assert.ok('reason' in (await kubeProxyImage(kubeConfig(), SELECTOR, 5000)()))
})

test("kube-proxy transport: only a running host-network Pod of the DaemonSet on that node is kube-proxy's Pod", async () => {
  const offNetwork = kubeProxyPodObject('node-c', true)
  offNetwork.spec = {...offNetwork.spec, hostNetwork: false}
  serve([impostor('node-a'), kubeProxyPodObject('node-b', true), offNetwork])
  const on = podsByNode(kubeConfig(), SELECTOR, 5000)
  assert.deepEqual(await on('node-a'), {
    kind: 'none',
    reason:
      "the Pod kube-system/evil-node-a on node-a is not owned by a DaemonSet of kube-system: not exec'd into as kube-proxy's",
  })
  assert.deepEqual(await on('node-b'), {
    kind: 'found',
    pod: {
      namespace: 'kube-system',
      name: 'kube-proxy-bx7k2',
      container: 'kube-proxy',
      image: 'registry.k8s.io/kube-proxy:v1.33.0',
    },
  })
  assert.deepEqual(await on('node-c'), {
    kind: 'none',
    reason:
      "the Pod kube-system/kube-proxy-cx7k2 on node-c does not use the node's network: it does not see the node's rules",
  })
})

test('--via debug-pod: the image and digest are announced before anything is created; none, and nothing is created', async () => {
  const connect = (debugImage?: string) => {
    const said: string[] = []
    const made = TRANSPORTS['debug-pod'].connect({
      access: {via: 'debug-pod', insecureIgnoreHostKey: false, concurrency: 1, ...(debugImage ? {debugImage} : {})},
      timeoutMs: 5000,
      kubeConfig,
      kubectl: ['kubectl'],
      nodes: ['node-a'],
      announce: (l) => said.push(l),
    })
    return {said, made}
  }
  serve([impostor('node-a'), kubeProxyPodObject('node-b', true)])
  const ok = connect()
  await ok.made
  assert.match(
    ok.said[0],
    new RegExp(`; image ${PINNED.replace(/[.]/g, '\\.')}, kube-proxy's DaemonSet kube-system/kube-proxy,`),
  )
  serve([impostor('node-a')])
  const refused = connect()
  const connector = await refused.made
  assert.deepEqual(refused.said, [])
  await assert.rejects(connector({name: 'node-a'}), (e) => {
    assert.ok(e instanceof TransportUnavailable)
    assert.match(e.message, /owned by a DaemonSet of kube-system .*give one with --debug-image/)
    return true
  })
  assert.equal(api.podsEverCreated.length, 0)
  const given = connect('busybox:1.36')
  await given.made
  assert.match(given.said[0], /; image busybox:1\.36, --debug-image\)/)
})
