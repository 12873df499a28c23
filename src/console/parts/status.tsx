import { useEffect, useState } from 'preact/hooks';
import { errorText } from '../api.js';

// One status line for the whole console (role=status, read out by screen readers): what the
// last action did, or why it failed.
interface Said {
  readonly text: string;
  readonly error: boolean;
}

let current: Said = { text: '', error: false };
const listeners = new Set<(said: Said) => void>();

export function say(text: string, error = false): void {
  current = { text, error };
  for (const listener of listeners) listener(current);
}

export function sayError(error: unknown): void {
  say(errorText(error), true);
}

export function StatusLine() {
  const [said, setSaid] = useState(current);
  useEffect(() => {
    listeners.add(setSaid);
    return () => void listeners.delete(setSaid);
  }, []);
  return <p id="status" role="status" aria-live="polite" class={said.error ? 'error' : undefined}>{said.text}</p>;
}

/** Runs an action with its control marked busy, saying what it does and then what it did. */
export async function act(control: HTMLElement | null, doing: string, work: () => Promise<string | void>): Promise<boolean> {
  const button = control as HTMLButtonElement | null;
  if (button) {
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
  }
  say(doing);
  try {
    const done = await work();
    if (done) say(done);
    return true;
  } catch (error) {
    sayError(error);
    return false;
  } finally {
    if (button) {
      button.disabled = false;
      button.removeAttribute('aria-busy');
    }
  }
}
