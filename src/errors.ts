/** A failure that stops the diagnosis: printed as one line, exit code 2. */
export class DiagnosisError extends Error {
  readonly exitCode = 2
}
