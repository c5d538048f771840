// The pages, in the order the header lists them. `role` says whose token opens a page
// (`tenant` or `admin`); `hidden` pages are reached by links only. A new page is a
// component in this folder, its API calls in `../api.js`, and an entry here.

import { Chat } from './chat.jsx';
import { Agents } from './agents.jsx';
import { Sessions } from './sessions.jsx';
import { Inspector } from './inspector.jsx';
import { Runs } from './runs.jsx';
import { Webhooks } from './webhooks.jsx';
import { Usage } from './usage.jsx';
import { Admin } from './admin.jsx';

export const PAGES = [
  { path: 'chat', title: 'Chat', role: 'tenant', component: Chat },
  { path: 'agents', title: 'Agents', role: 'tenant', component: Agents },
  { path: 'sessions', title: 'Sessions', role: 'tenant', component: Sessions },
  { path: 'turns', title: 'Turn inspector', role: 'tenant', component: Inspector },
  { path: 'runs', title: 'Runs & tasks', role: 'tenant', component: Runs },
  { path: 'webhooks', title: 'Webhooks', role: 'tenant', component: Webhooks },
  { path: 'usage', title: 'Usage & quotas', role: 'tenant', component: Usage },
  { path: 'admin', title: 'Tenants', role: 'admin', component: Admin },
];
