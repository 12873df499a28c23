import type { ComponentChildren } from 'preact';
import { useRef } from 'preact/hooks';
import { act } from './status.js';

/**
 * A button whose action asks first, in a modal dialog (the browser's own <dialog>: focus stays
 * inside it and Escape cancels). For anything destructive or hard to undo.
 */
export function ConfirmButton(props: {
  label: string;
  title: string;
  children: ComponentChildren;
  confirmLabel?: string;
  doing: string;
  onConfirm: () => Promise<string | void>;
  danger?: boolean;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const opener = useRef<HTMLButtonElement>(null);
  return (
    <>
      <button type="button" ref={opener} class={props.danger ? 'danger' : undefined} onClick={() => dialog.current?.showModal()}>{props.label}</button>
      <dialog ref={dialog} aria-label={props.title}>
        <form
          method="dialog"
          onSubmit={(event) => {
            event.preventDefault();
            dialog.current?.close();
            void act(opener.current, props.doing, props.onConfirm);
          }}
        >
          <h2>{props.title}</h2>
          {props.children}
          <div class="actions">
            <button type="submit" class={props.danger ? 'danger' : 'primary'}>{props.confirmLabel ?? props.label}</button>
            <button type="button" onClick={() => dialog.current?.close()}>Cancel</button>
          </div>
        </form>
      </dialog>
    </>
  );
}

/** A dialog holding a form; `open` opens it, the form's own submit decides when it closes. */
export function FormDialog(props: { title: string; dialog: { current: HTMLDialogElement | null }; children: ComponentChildren }) {
  return (
    <dialog ref={props.dialog} aria-label={props.title}>
      <h2>{props.title}</h2>
      {props.children}
    </dialog>
  );
}
