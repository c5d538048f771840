// Hash routing (`#/sessions/sess_…`): the server serves one page, and a reload or a shared
// link lands on the same view.

import { useEffect, useState } from 'preact/hooks';

function current() {
  const path = decodeURIComponent(location.hash.replace(/^#\/?/, ''));
  return path.split('/').filter(Boolean);
}

/** The route's segments, e.g. `['sessions', 'sess_…']`; re-renders on navigation. */
export function useRoute() {
  const [route, setRoute] = useState(current);
  useEffect(() => {
    const update = () => setRoute(current());
    addEventListener('hashchange', update);
    return () => removeEventListener('hashchange', update);
  }, []);
  return route;
}

export function navigate(path) {
  location.hash = '#/' + path.replace(/^\//, '');
}

export const href = (path) => '#/' + path.replace(/^\//, '');
