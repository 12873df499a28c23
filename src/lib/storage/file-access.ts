import { accessSync, constants, readFileSync, statSync, type Stats } from 'node:fs';
import { userInfo } from 'node:os';
import path from 'node:path';
import { LicenseServerError } from '../errors.js';

/**
 * DATABASE_PERMISSION_DENIED when this process's user may not use the store's file at `file`
 * (the SQLite database, or a lock file beside it), else undefined. A store made by another
 * user (root, the daemon's account) otherwise reads as a missing store (a directory that
 * cannot be searched hides the file) or as SQLite's "unable to open database file". Checked
 * in path order: a directory on the way that cannot be searched; then, when the file exists,
 * the file, which must be readable and writable, and its directory, where SQLite creates the
 * -wal and -shm files; when it does not and `create` is set, the nearest existing directory,
 * which must take new entries. A missing file is not this function's business otherwise.
 */
export function storeAccessDenied(file: string, options: { readonly create: boolean; readonly what: string }): LicenseServerError | undefined {
  const target = path.resolve(file);
  const directories: string[] = [];
  for (let dir = path.dirname(target); ; dir = path.dirname(dir)) {
    directories.unshift(dir);
    if (dir === path.dirname(dir)) break;
  }
  let lastExisting: string | undefined;
  for (const dir of directories) {
    // A missing directory, or a file where one should be, is no matter of permissions.
    if (!statOf(dir)?.isDirectory()) break;
    if (!allowed(dir, constants.X_OK)) return denied(options.what, target, dir, 'search');
    lastExisting = dir;
  }
  if (lastExisting === path.dirname(target) && statOf(target)) {
    if (!allowed(target, constants.R_OK | constants.W_OK)) return denied(options.what, target, target, 'read and write');
    if (!allowed(lastExisting, constants.W_OK)) return denied(options.what, target, lastExisting, 'create files in');
  } else if (options.create && lastExisting && !allowed(lastExisting, constants.W_OK)) {
    return denied(options.what, target, lastExisting, lastExisting === path.dirname(target) ? 'create files in' : 'create directories in');
  }
  return undefined;
}

function statOf(file: string): Stats | undefined {
  try {
    return statSync(file);
  } catch {
    return undefined;
  }
}

function allowed(file: string, mode: number): boolean {
  try {
    accessSync(file, mode);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code !== 'EACCES' && code !== 'EPERM';
  }
}

function denied(what: string, file: string, blocking: string, action: string): LicenseServerError {
  const stats = statOf(blocking);
  const name = stats ? userName(stats.uid) : undefined;
  const owner = name ?? (stats ? `uid ${stats.uid}` : 'unknown');
  const mode = stats ? (stats.mode & 0o7777).toString(8).padStart(4, '0') : '?';
  const me = currentUser();
  const message = blocking === file
    ? `permission denied: user ${me} cannot ${action} ${what} ${file} (owned by ${owner}, mode ${mode})`
    : `permission denied: user ${me} cannot ${action} the directory ${blocking} (owned by ${owner}, mode ${mode}), so cannot open ${what} ${file}`;
  const sudo = name ?? `'#${stats?.uid ?? '?'}'`;
  return new LicenseServerError('DATABASE_PERMISSION_DENIED', message, {
    hint: `Run the command as the user that owns the store (${owner}: \`sudo -u ${sudo} ...\`), or give ${me} access to ${blocking}.`,
  });
}

function currentUser(): string {
  try {
    return userInfo().username;
  } catch {
    return `uid ${process.getuid?.() ?? '?'}`;
  }
}

/** The name /etc/passwd gives `uid`, if any (a container's user may be a bare number). */
function userName(uid: number): string | undefined {
  try {
    for (const line of readFileSync('/etc/passwd', 'utf8').split('\n')) {
      const [name, , id] = line.split(':');
      if (name && Number(id) === uid && id !== '') return name;
    }
  } catch {
    // No passwd file (Windows, a minimal container): the number names the owner well enough.
  }
  return undefined;
}
