// Usage and quotas: tokens and turns per day as a chart, the quotas in force and what is
// left of them. The admin's tenant view reuses UsageChart with the admin API's report.

import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { api } from '../api.js';
import { ErrorNote, Loading, useLoad } from '../components.jsx';
import { explain } from './chat.jsx';

export const DAYS = 30;

export function since(days = DAYS) {
  const start = new Date();
  start.setUTCHours(0, 0, 0, 0);
  start.setUTCDate(start.getUTCDate() - (days - 1));
  return start.toISOString();
}

/** The report's days as columns, one per calendar day (days without turns are zeros). */
function columns(report, days = DAYS) {
  const byDate = new Map((report.days || []).map((d) => [d.date, d]));
  const xs = [];
  const tokens = [];
  const turns = [];
  const start = new Date(since(days));
  for (let i = 0; i < days; i++) {
    const day = new Date(start.getTime() + i * 86400000);
    const key = day.toISOString().slice(0, 10);
    const found = byDate.get(key);
    xs.push(day.getTime() / 1000);
    tokens.push(found ? found.input_tokens + found.output_tokens : 0);
    turns.push(found ? found.turns : 0);
  }
  return [xs, tokens, turns];
}

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
}

/** 'light' or 'dark', as the page shows now (the system's choice or the switch's). */
function useScheme() {
  const read = () => (getComputedStyle(document.documentElement).colorScheme.includes('dark') ? 'dark' : 'light');
  const [scheme, setScheme] = useState(read);
  useEffect(() => {
    const update = () => setScheme(read());
    const media = matchMedia('(prefers-color-scheme: dark)');
    media.addEventListener('change', update);
    const observer = new MutationObserver(update);
    observer.observe(document.documentElement, { attributes: true, attributeFilter: ['data-theme'] });
    return () => {
      media.removeEventListener('change', update);
      observer.disconnect();
    };
  }, []);
  return scheme;
}

export function UsageChart({ report }) {
  const box = useRef(null);
  const scheme = useScheme();
  useEffect(() => {
    if (!box.current) return;
    const data = columns(report);
    const width = () => Math.max(280, box.current.clientWidth);
    const chart = new uPlot(
      {
        width: width(),
        height: 260,
        scales: { x: { time: true }, turns: { auto: true } },
        axes: [
          { stroke: cssVar('--text'), grid: { stroke: cssVar('--line') } },
          { label: 'tokens', stroke: cssVar('--text'), grid: { stroke: cssVar('--line') } },
          { label: 'turns', side: 1, scale: 'turns', stroke: cssVar('--text'), grid: { show: false } },
        ],
        series: [
          { label: 'day', value: (u, v) => (v == null ? '' : new Date(v * 1000).toISOString().slice(0, 10)) },
          {
            label: 'tokens',
            stroke: cssVar('--accent'),
            fill: cssVar('--accent-soft'),
            width: 2,
            paths: uPlot.paths.bars({ size: [0.6, 40] }),
            points: { show: false },
          },
          { label: 'turns', scale: 'turns', stroke: cssVar('--warn'), width: 2, points: { size: 5 } },
        ],
      },
      data,
      box.current,
    );
    const observer = new ResizeObserver(() => chart.setSize({ width: width(), height: 260 }));
    observer.observe(box.current);
    return () => {
      observer.disconnect();
      chart.destroy();
    };
  }, [report, scheme]);
  const data = columns(report);
  const totalTokens = data[1].reduce((a, b) => a + b, 0);
  const totalTurns = data[2].reduce((a, b) => a + b, 0);
  return (
    <figure class="chart">
      <div ref={box} role="img" aria-label={`Tokens and turns per day over the last ${DAYS} days: ${totalTokens} tokens, ${totalTurns} turns`} />
      <figcaption class="small muted">
        Last {DAYS} days (UTC): {report.turns} turns,{' '}
        {report.input_tokens} input and {report.output_tokens} output tokens, {report.tool_calls} tool calls.
      </figcaption>
    </figure>
  );
}

const QUOTA_NAMES = {
  requests_per_minute: 'Requests per minute',
  turns_per_minute: 'Turns per minute',
  concurrent_turns: 'Concurrent turns',
  queued_turns: 'Queued turns',
  tokens_per_day: 'Tokens per day',
  stored_sessions: 'Stored sessions',
};

export function QuotaTable({ quotas, remaining, own }) {
  return (
    <div class="table-wrap">
      <table>
        <thead>
          <tr>
            <th scope="col">Quota</th>
            <th scope="col">Limit</th>
            {remaining && <th scope="col">Left</th>}
            {own && <th scope="col">Own value</th>}
          </tr>
        </thead>
        <tbody>
          {Object.keys(QUOTA_NAMES).map((name) => (
            <tr key={name}>
              <th scope="row">{QUOTA_NAMES[name]}</th>
              <td>{quotas[name] ?? 'unlimited'}</td>
              {remaining && <td data-quota={name}>{remaining[name] ?? '—'}</td>}
              {own && <td>{own[name] ?? 'default'}</td>}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function Usage() {
  const [usage, usageError] = useLoad(() => api.usage(since()), []);
  const [quotas, quotaError] = useLoad(() => api.quotas(), []);
  return (
    <div class="stack">
      <section class="card">
        <h1>Usage</h1>
        <ErrorNote error={explain(usageError)} />
        {usage ? <UsageChart report={usage} /> : !usageError && <Loading />}
      </section>
      <section class="card">
        <h2>Quotas</h2>
        <ErrorNote error={explain(quotaError)} />
        {quotas ? (
          <>
            <QuotaTable quotas={quotas.body.quotas} remaining={quotas.body.remaining} />
            <p class="small muted">
              Today's tokens: {quotas.body.used.tokens_per_day}; sessions kept: {quotas.body.used.stored_sessions}. Per-minute quotas refill
              continuously; "—" means not counted here.
            </p>
          </>
        ) : (
          !quotaError && <Loading />
        )}
      </section>
    </div>
  );
}
