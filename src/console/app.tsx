import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, errorText, getJson, onUnauthorized } from './api.js';
import { href, usePlace } from './router.js';
import { forgetToken, mayCall, SessionContext, storedToken, storeToken, type Session } from './session.js';
import { SearchBox } from './parts/search.js';
import { say, StatusLine } from './parts/status.js';
import { views, type ViewProps } from './views/index.js';


export function App() {
  const [session, setSession] = useState<Session | null>(null);
  const [checking, setChecking] = useState(Boolean(storedToken()));

  const signIn = async () => {
    try {
      setSession(await getJson<Session>('/api/whoami'));
    } catch (error) {
      setSession(null);
      if (!(error instanceof ApiError && error.status === 401)) say(errorText(error), true);
    } finally {
      setChecking(false);
    }
  };
  useEffect(() => {
    if (storedToken()) void signIn();
    return onUnauthorized((message) => {
      setSession(null);
      say(message, true);
    });
  }, []);

  const signOut = () => {
    forgetToken();
    setSession(null);
    say('Signed out.');
  };

  return (
    <>
      <a class="skip" href="#main">Skip to content</a>
      <header>
        <p class="brand">license-server</p>
        {session && <SearchBox />}
        {session && (
          <div class="who">
            <span title={`Scopes: ${session.scopes.join(', ')}`}>{session.actor}</span>
            <button type="button" onClick={signOut}>Sign out</button>
          </div>
        )}
      </header>
      {session && <Nav session={session} />}
      <main id="main" tabIndex={-1}>
        <StatusLine />
        {session ? (
          <SessionContext.Provider value={session}>
            <Routed session={session} />
          </SessionContext.Provider>
        ) : checking ? <p>Checking the token…</p> : <SignIn onSignedIn={signIn} />}
      </main>
    </>
  );
}

function Nav({ session }: { session: Session }) {
  const place = usePlace();
  const current = place.parts[0] ?? '';
  return (
    <nav id="nav" aria-label="Views">
      {views.filter((view) => mayCall(session, view.route)).map((view) => (
        <a key={view.path} href={href(view.path)} aria-current={current === view.path ? 'page' : undefined}>{view.title}</a>
      ))}
    </nav>
  );
}

function SignIn({ onSignedIn }: { onSignedIn: () => Promise<void> }) {
  const field = useRef<HTMLInputElement>(null);
  useEffect(() => field.current?.focus(), []);
  return (
    <section aria-labelledby="sign-in-title" class="sign-in">
      <h1 id="sign-in-title">Sign in</h1>
      <form
        onSubmit={async (event) => {
          event.preventDefault();
          const input = field.current!;
          storeToken(input.value.trim());
          input.value = '';
          await onSignedIn();
          if (storedToken()) say('Signed in.');
        }}
      >
        <label for="token">Admin token</label>
        <input id="token" ref={field} name="token" type="password" autoComplete="off" required />
        <button type="submit" class="primary">Sign in</button>
      </form>
      <p class="hint">The token stays in this tab's session storage and is sent only to this server. Create one with <code>license-server token create</code>.</p>
    </section>
  );
}

function Routed({ session }: { session: Session }) {
  const place = usePlace();
  const view = views.find((candidate) => candidate.path === (place.parts[0] ?? ''));
  useEffect(() => {
    document.title = `${view?.title ?? 'Not found'} · license-server`;
  }, [view]);
  if (!view) return <Page title="Not found"><p>There is no such page. <a href={href('')}>Go to the attention page.</a></p></Page>;
  if (!mayCall(session, view.route)) return <Page title={view.title}><p>This token's scopes ({session.scopes.join(', ')}) do not allow {view.route}, which this page shows.</p></Page>;
  const props: ViewProps = { session, id: place.parts[1], query: place.query };
  return <view.component {...props} />;
}

export function Page(props: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section aria-labelledby="page-title">
      <div class="page-head">
        <h1 id="page-title">{props.title}</h1>
        {props.actions && <div class="actions">{props.actions}</div>}
      </div>
      {props.children}
    </section>
  );
}
