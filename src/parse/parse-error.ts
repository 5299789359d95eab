/**
 * Input a parser does not read: the line it stopped at (0 where no line is known, e.g. one rule or one element parsed
 * on its own) and why. `what` names the input in the message where the caller's message does not ("ip route output
 * line 3: …"); `cause` is the error it re-wraps, if any.
 */
export class ParseError extends Error {
  constructor(
    readonly line: number,
    readonly reason: string,
    options: {what?: string; cause?: unknown} = {},
  ) {
    super(
      `${options.what ? `${options.what} ` : ''}${line > 0 ? `line ${line}: ` : ''}${reason}`,
      options.cause === undefined ? undefined : {cause: options.cause},
    )
  }
}
