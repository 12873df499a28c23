import { useEffect, useRef, useState } from 'preact/hooks';
import { errorText, getJson } from '../api.js';
import { Page } from '../app.js';
import { Time } from '../format.js';
import { Failure } from '../parts/details.js';
import { say } from '../parts/status.js';
import type { ViewProps } from './index.js';

interface SigningKey {
  readonly key_id: string;
  readonly state: string;
  readonly created_at: string;
  readonly fingerprint: string;
  readonly public_key_pem: string;
}

/** The same text as `signing-key show --all`, which `license verify --public-key` and the client read. */
export function keySetText(keys: readonly SigningKey[]): string {
  return keys.map((key) => `# key_id ${key.key_id} ${key.state}\n${key.public_key_pem}`).join('');
}

/** Public keys only: what clients verify .lic files and grace tokens with. Rotating and retiring stay on the command line. */
export function SigningKeysView(_props: ViewProps) {
  const [active, setActive] = useState<{ public_key_pem: string; key_id: string } | null>(null);
  const [keys, setKeys] = useState<SigningKey[] | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const pem = useRef<HTMLPreElement>(null);
  const set = useRef<HTMLPreElement>(null);
  useEffect(() => {
    const abort = new AbortController();
    Promise.all([getJson<{ public_key_pem: string; key_id: string }>('/api/signing-key', abort.signal), getJson<{ keys: SigningKey[] }>('/api/signing-keys', abort.signal)]).then(
      ([key, all]) => {
        setActive(key);
        setKeys(all.keys);
      },
      (error) => {
        if (!abort.signal.aborted) setFailure(errorText(error));
      },
    );
    return () => abort.abort();
  }, []);
  return (
    <Page title="Signing keys">
      {failure && <Failure text={failure} />}
      <section aria-labelledby="active-key-title">
        <h2 id="active-key-title">Active public key</h2>
        <p>Clients verify <code>.lic</code> files and grace tokens with this public key, the active one{active ? ` (key id ${active.key_id})` : ''}.</p>
        <pre id="pem" ref={pem} aria-label="Active public key (PEM)">{active?.public_key_pem ?? ''}</pre>
        <button type="button" disabled={!active} onClick={() => copy(pem.current, active?.public_key_pem ?? '', 'Public key copied.')}>Copy public key</button>
      </section>
      <section aria-labelledby="key-set-title">
        <h2 id="key-set-title">Key set</h2>
        <p>Every key that verifies: after a rotation, older files and tokens verify with the key set (<code>signing-key show --all</code>). Rotate and retire keys with <code>license-server signing-key</code> or the API.</p>
        <div class="scroll">
          <table id="key-table">
            <caption class="visually-hidden">Signing keys that verify</caption>
            <thead><tr><th scope="col">Key id</th><th scope="col">State</th><th scope="col">Created</th><th scope="col">Fingerprint (SHA-256)</th></tr></thead>
            <tbody aria-busy={keys === null && failure === null ? 'true' : 'false'}>
              {keys?.map((key) => (
                <tr key={key.key_id} data-key-id={key.key_id}>
                  <td class="key">{key.key_id}</td>
                  <td>{key.state}</td>
                  <td class="value"><Time iso={key.created_at} /></td>
                  <td class="key fingerprint">{key.fingerprint}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        <details>
          <summary>The key set as text</summary>
          <pre id="key-set" ref={set} aria-label="Key set (PEM)">{keys ? keySetText(keys) : ''}</pre>
        </details>
        <button type="button" disabled={!keys} onClick={() => copy(set.current, keys ? keySetText(keys) : '', 'Key set copied.')}>Copy key set</button>
      </section>
    </Page>
  );
}

/** Copies, or where the browser refuses (no permission, plain HTTP) selects the text for Ctrl+C. */
async function copy(element: HTMLElement | null, text: string, done: string): Promise<void> {
  try {
    await navigator.clipboard.writeText(text);
    say(done);
  } catch {
    const details = element?.closest('details');
    if (details) details.open = true;
    if (element) getSelection()?.selectAllChildren(element);
    say('Select-all done: press Ctrl+C (or Cmd+C) to copy.');
  }
}
