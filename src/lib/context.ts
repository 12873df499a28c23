/**
 * Who is acting and what time it is, passed to every operation that changes a record so
 * that the audit log can say who did what and when, and tests can fix the clock.
 */
export interface OperationContext {
  /** `cli:<user>` for the command line, `token:<name>` for the admin API. */
  readonly actor: string;
  readonly clock?: () => Date;
}

export function now(context: Pick<OperationContext, 'clock'> | undefined): Date {
  return context?.clock ? context.clock() : new Date();
}
