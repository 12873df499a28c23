/** An error as the command line reports it: `Error: ... (CODE)`, a `Try:` line, an exit code. */
export interface Reportable {
  readonly code: string;
  readonly message: string;
  readonly hint: string | undefined;
  readonly exitCode: number;
}

/** The two lines on standard error, or the JSON document on standard output with --json. */
export function renderReport(reported: Reportable, json: boolean): { stdout?: string; stderr?: string } {
  if (json) return { stdout: `${JSON.stringify({ error: { code: reported.code, message: reported.message } }, null, 2)}\n` };
  return { stderr: `Error: ${reported.message} (${reported.code})\n${reported.hint ? `Try: ${reported.hint}\n` : ''}` };
}
