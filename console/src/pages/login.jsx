// Logging in: a client id and secret exchanged at POST /auth/token (the admin logs in with
// client id `admin` and the admin secret), or a token pasted as it is.

import { useState } from 'preact/hooks';
import { logIn, usePastedToken } from '../api.js';
import { ErrorNote } from '../components.jsx';

export function Login() {
  const [mode, setMode] = useState('credentials');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);

  const submit = async (event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    setBusy(true);
    setError(null);
    try {
      if (mode === 'credentials') await logIn(form.get('client_id'), form.get('client_secret'));
      else usePastedToken(form.get('token'));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="login card" aria-labelledby="login-title">
      <h1 id="login-title">agentry console</h1>
      <p class="muted">
        Your token stays in this tab (session storage) and is sent only to this server.
      </p>
      <div class="tabs" role="radiogroup" aria-label="How to log in">
        <label>
          <input type="radio" name="mode" checked={mode === 'credentials'} onChange={() => setMode('credentials')} />
          Client id and secret
        </label>
        <label>
          <input type="radio" name="mode" checked={mode === 'token'} onChange={() => setMode('token')} />
          Paste a token
        </label>
      </div>
      <form onSubmit={submit}>
        {mode === 'credentials' ? (
          <>
            <label for="client_id">Client id</label>
            <input id="client_id" name="client_id" autocomplete="username" required />
            <label for="client_secret">Client secret</label>
            <input id="client_secret" name="client_secret" type="password" autocomplete="current-password" required />
          </>
        ) : (
          <>
            <label for="token">Bearer token</label>
            <textarea id="token" name="token" rows={4} required spellcheck={false} />
          </>
        )}
        <ErrorNote error={error} />
        <button class="primary" type="submit" disabled={busy}>
          Log in
        </button>
      </form>
    </section>
  );
}
