// The console: a header with the pages the login may open, and the page the route names.

import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { currentLogin, logOut, onLoginChange, stopActing } from './api.js';
import { href, navigate, useRoute } from './router.js';
import { PAGES } from './pages/index.js';
import { Login } from './pages/login.jsx';

function useLogin() {
  const [login, setLogin] = useState(currentLogin);
  useEffect(() => onLoginChange(setLogin), []);
  return login;
}

const THEME = 'agentry.console.theme';

function ThemeSwitch() {
  const [theme, setTheme] = useState(() => localStorage.getItem(THEME) || 'auto');
  useEffect(() => {
    if (theme === 'auto') delete document.documentElement.dataset.theme;
    else document.documentElement.dataset.theme = theme;
    localStorage.setItem(THEME, theme);
  }, [theme]);
  return (
    <label class="theme">
      <span class="visually-hidden">Colour scheme</span>
      <select value={theme} onChange={(e) => setTheme(e.currentTarget.value)}>
        <option value="auto">Auto</option>
        <option value="light">Light</option>
        <option value="dark">Dark</option>
      </select>
    </label>
  );
}

function Header({ login, route }) {
  const pages = PAGES.filter((page) => page.role === login.role && !page.hidden);
  const who =
    login.role === 'admin'
      ? 'admin'
      : login.tenantName
        ? `tenant ${login.tenantName}`
        : `tenant ${login.subject}`;
  return (
    <header class="top">
      <a class="brand" href={href(pages[0].path)}>
        agentry
      </a>
      <nav aria-label="Pages">
        <ul>
          {pages.map((page) => (
            <li key={page.path}>
              <a href={href(page.path)} aria-current={route[0] === page.path ? 'page' : undefined}>
                {page.title}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <div class="who">
        <span class="muted who-name" data-testid="who" title={who}>
          {who}
        </span>
        {login.previous && (
          <button type="button" onClick={() => (stopActing(), navigate('admin'))}>
            Back to admin
          </button>
        )}
        <ThemeSwitch />
        <button type="button" onClick={() => (logOut(), navigate(''))}>
          Log out
        </button>
      </div>
    </header>
  );
}

function App() {
  const login = useLogin();
  const route = useRoute();
  // Once logged in (or out), the keyboard starts from the page's content.
  const loggedIn = Boolean(login);
  useEffect(() => {
    if (loggedIn) document.getElementById('main')?.focus();
  }, [loggedIn]);
  if (!login) {
    return (
      <main id="main">
        <Login />
      </main>
    );
  }
  const pages = PAGES.filter((page) => page.role === login.role);
  const page = pages.find((p) => p.path === route[0]) || pages[0];
  const Page = page.component;
  return (
    <>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById('main')?.focus())}>
        Skip to content
      </a>
      <Header login={login} route={route} />
      <main id="main" tabIndex={-1}>
        <Page route={route.slice(1)} login={login} key={`${login.token}`} />
      </main>
    </>
  );
}

render(<App />, document.getElementById('app'));
