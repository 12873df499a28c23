/** Hides the password of a postgres:// URL (in the user-info part or a password= parameter). */
export function redactDatabaseUrl(url: string): string {
  if (!/^postgres(ql)?:\/\//i.test(url)) return url;
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    if (parsed.searchParams.has('password')) parsed.searchParams.set('password', '***');
    return parsed.toString();
  } catch {
    return 'postgres://[unparseable URL redacted]';
  }
}
