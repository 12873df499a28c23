import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import { ACTIONS, type ActionName } from './actions.js';

// The admin token lives in this tab's sessionStorage and goes out only in the Authorization
// header of same-origin requests: never in a URL, a cookie or localStorage.
const TOKEN_KEY = 'license-server-admin-token';

export type Scope = 'read' | 'licenses' | 'backups' | 'restore' | 'metrics' | 'admin';

/** GET /api/whoami: the token's name, scopes, and the admin routes it may call. */
export interface Session {
  readonly actor: string;
  readonly scopes: readonly Scope[];
  readonly routes?: readonly string[];
}

export function storedToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function storeToken(token: string): void {
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function forgetToken(): void {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** The router's rule: `admin` allows everything; otherwise the scope itself. */
export function allows(session: Session | null, scope: Scope): boolean {
  return session !== null && (session.scopes.includes('admin') || session.scopes.includes(scope));
}

/** Whether the token may call this route ("POST /api/licenses/{id}/renew"), by the server's own table. */
export function mayCall(session: Session | null, route: string): boolean {
  if (session === null) return false;
  // A server older than the routes list: fall back to the scope the route's kind needs.
  if (session.routes === undefined) return allows(session, route.startsWith('GET ') ? 'read' : 'licenses');
  return session.routes.includes(route);
}

export const SessionContext = createContext<Session | null>(null);

/** Whether the signed-in token may do this action of the console (actions.ts). */
export function useMay(): (action: ActionName) => boolean {
  const session = useContext(SessionContext);
  return (action) => mayCall(session, ACTIONS[action].route);
}
