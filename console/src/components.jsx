// Small pieces every page uses.

import { useEffect, useRef, useState } from 'preact/hooks';

export function ErrorNote({ error, prefix }) {
  if (!error) return null;
  const text = error.message || String(error);
  const code = error.code ? ` (${error.code}${error.status ? `, ${error.status}` : ''})` : '';
  return (
    <p class="error" role="alert">
      {prefix ? `${prefix}: ` : ''}
      {text}
      {code}
    </p>
  );
}

export function Loading({ what = 'Loading' }) {
  return (
    <p class="muted" role="status">
      {what}…
    </p>
  );
}

/** Loads `load()` when `deps` change: `[value, error, reload]`. */
export function useLoad(load, deps) {
  const [state, setState] = useState({ value: undefined, error: null });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ value: s.value, error: null }));
    Promise.resolve()
      .then(load)
      .then(
        (value) => live && setState({ value, error: null }),
        (error) => live && setState({ value: undefined, error }),
      );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  return [state.value, state.error, () => setTick((t) => t + 1)];
}

export function Time({ value }) {
  if (!value) return <span class="muted">—</span>;
  const date = new Date(value);
  return (
    <time datetime={value} title={value}>
      {date.toLocaleString()}
    </time>
  );
}

export function Json({ value, label }) {
  return (
    <pre class="json" tabIndex={0} aria-label={label || 'JSON'}>
      {JSON.stringify(value, null, 2)}
    </pre>
  );
}

/** A secret shown this once, with a way to copy it. */
export function ShownOnce({ label, value, onDone }) {
  const [copied, setCopied] = useState(false);
  return (
    <div class="shown-once" role="region" aria-label={`${label} (shown once)`}>
      <p>
        <strong>{label}</strong> — shown this once; copy it now, it cannot be read again.
      </p>
      <code class="secret" data-testid="shown-once">
        {value}
      </code>
      <div class="row">
        <button
          type="button"
          onClick={() => navigator.clipboard?.writeText(value).then(() => setCopied(true), () => {})}
        >
          {copied ? 'Copied' : 'Copy'}
        </button>
        {onDone && (
          <button type="button" onClick={onDone}>
            Done
          </button>
        )}
      </div>
    </div>
  );
}

/** A button that asks in a modal dialog before it acts. */
export function ConfirmButton({ label, question, confirmLabel, onConfirm, danger, disabled }) {
  const dialog = useRef(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const open = () => {
    setError(null);
    dialog.current?.showModal();
  };
  const confirm = async (event) => {
    event.preventDefault();
    setBusy(true);
    try {
      await onConfirm();
      dialog.current?.close();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button type="button" class={danger ? 'danger' : ''} onClick={open} disabled={disabled}>
        {label}
      </button>
      <dialog ref={dialog} aria-label={label}>
        <form method="dialog" onSubmit={confirm}>
          <p>{question}</p>
          <ErrorNote error={error} />
          <div class="row">
            <button type="submit" class={danger ? 'danger' : 'primary'} disabled={busy}>
              {confirmLabel || label}
            </button>
            <button type="button" onClick={() => dialog.current?.close()}>
              Cancel
            </button>
          </div>
        </form>
      </dialog>
    </>
  );
}

/** A list loaded a page at a time (`load(after)` → `{items, next}`). */
export function usePaged(load, deps) {
  const [items, setItems] = useState([]);
  const [next, setNext] = useState(null);
  const [error, setError] = useState(null);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setLoading(true);
    setError(null);
    load(undefined).then(
      (page) => {
        if (!live) return;
        setItems(page.items);
        setNext(page.next || null);
        setLoading(false);
      },
      (e) => live && (setError(e), setLoading(false)),
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  const more = async () => {
    setLoading(true);
    try {
      const page = await load(next);
      setItems((old) => [...old, ...page.items]);
      setNext(page.next || null);
    } catch (e) {
      setError(e);
    } finally {
      setLoading(false);
    }
  };
  return { items, next, error, loading, more, reload: () => setTick((t) => t + 1) };
}

export function MoreButton({ paged, label = 'Load more' }) {
  if (paged.loading) return <Loading />;
  if (!paged.next) return null;
  return (
    <button type="button" onClick={paged.more}>
      {label}
    </button>
  );
}

export function Status({ value }) {
  return <span class={`badge status-${value}`}>{value}</span>;
}
