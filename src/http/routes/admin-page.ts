import { readFileSync } from 'node:fs';
import type { Route } from '../router.js';

/** Only this origin's files: no inline script, no CDN, no framing. */
export const CONTENT_SECURITY_POLICY =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const ASSETS = {
  '/admin/admin.js': { file: 'admin.js', type: 'text/javascript; charset=utf-8' },
  '/admin/admin.css': { file: 'admin.css', type: 'text/css; charset=utf-8' },
} as const;

/**
 * The console's pages (src/console/views/index.ts): each has its own URL, which the daemon
 * answers with the page, so that a link pasted into a ticket opens the same view and back and
 * forward work. A list at /admin/<view>, a record at /admin/<view>/<id>.
 */
export const CONSOLE_VIEWS = ['licenses', 'customers', 'machines', 'entitlements', 'audit', 'deliveries', 'backups', 'signing-keys', 'tokens'] as const;

/** The console at /admin/, shipped inside the package (it works with no network). */
export function adminPageRoutes(): Route[] {
  const headers = {
    'Content-Security-Policy': CONTENT_SECURITY_POLICY,
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'no-referrer',
  };
  const redirect = (): Route['handle'] => async () => ({ status: 302, raw: '', contentType: 'text/plain', headers: { Location: '/admin/' } });
  // Read at the first request, not when the routes are built: tests and tools build the route
  // table without serving a page.
  const served = (file: string, type: string): Route['handle'] => {
    let content: Buffer | undefined;
    return async () => {
      content ??= readFileSync(new URL(`../admin/${file}`, import.meta.url));
      return { raw: content, contentType: type, headers };
    };
  };
  const page = served('index.html', 'text/html; charset=utf-8');
  return [
    { method: 'GET', path: '/', access: 'public', handle: redirect() },
    { method: 'GET', path: '/admin', access: 'public', handle: redirect() },
    { method: 'GET', path: '/admin/', access: 'public', handle: page },
    ...Object.entries(ASSETS).map(([path, asset]): Route => ({ method: 'GET', path, access: 'public', handle: served(asset.file, asset.type) })),
    ...CONSOLE_VIEWS.flatMap((view): Route[] => [
      { method: 'GET', path: `/admin/${view}`, access: 'public', handle: page },
      { method: 'GET', path: `/admin/${view}/:id`, access: 'public', handle: page },
    ]),
  ];
}
