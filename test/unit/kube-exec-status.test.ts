import assert from 'node:assert/strict'
import {test} from 'node:test'
import {exitCodeOf} from '../../src/kube/exec-in-pod.js'

test('exit code from the exec Status on the error channel', () => {
  assert.equal(exitCodeOf({metadata: {}, status: 'Success'} as never), 0)
  assert.equal(
    exitCodeOf({
      status: 'Failure',
      reason: 'NonZeroExitCode',
      details: {causes: [{reason: 'ExitCode', message: '137'}]},
    }),
    137,
  )
  assert.equal(
    exitCodeOf({status: 'Failure', reason: 'NonZeroExitCode', details: {causes: [{reason: 'ExitCode', message: 'x'}]}}),
    undefined,
  )
  assert.equal(exitCodeOf({status: 'Failure', reason: 'NonZeroExitCode'}), undefined)
  assert.equal(
    exitCodeOf({status: 'Failure', reason: 'InternalError', message: 'executable file not found in $PATH'}),
    undefined,
  )
})
