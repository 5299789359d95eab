import type {NetnsLab} from '../lab/netns-lab.js'
import {runCli, type CliResult} from './run-cli.js'

/** The flags that point the doctor at the lab: the test API server's kubeconfig and the lab nodes' SSH config. */
export function labAccess(lab: NetnsLab): string[] {
  return ['--kubeconfig', lab.kubeconfigPath, '--ssh-config', lab.sshConfigPath]
}

/** `svc web -n shop` (the lab's Service) against the lab, with `extra` flags after. */
export function labSvc(lab: NetnsLab, ...extra: string[]): Promise<CliResult> {
  return runCli(['svc', 'web', '-n', 'shop', ...labAccess(lab), ...extra])
}
