import { readFileSync } from 'node:fs';
import type { Route } from '../router.js';

/** Only this origin's files: no inline script, no CDN, no framing. */
export const CONTENT_SECURITY_POLICY =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const ASSETS = {
  '/admin/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/admin/admin.js': { file: 'admin.js', type: 'text/javascript; charset=utf-8' },
  '/admin/admin.css': { file: 'admin.css', type: 'text/css; charset=utf-8' },
} as const;

/** The admin web page at /admin/, shipped inside the package (it works with no network). */
export function adminPageRoutes(): Route[] {
  const headers = {
    'Content-Security-Policy': CONTENT_SECURITY_POLICY,
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'no-referrer',
  };
  const redirect = (): Route['handle'] => async () => ({ status: 302, raw: '', contentType: 'text/plain', headers: { Location: '/admin/' } });
  return [
    { method: 'GET', path: '/', access: 'public', handle: redirect() },
    { method: 'GET', path: '/admin', access: 'public', handle: redirect() },
    ...Object.entries(ASSETS).map(([path, asset]): Route => {
      const content = readFileSync(new URL(`../admin/${asset.file}`, import.meta.url));
      return { method: 'GET', path, access: 'public', handle: async () => ({ raw: content, contentType: asset.type, headers }) };
    }),
  ];
}
