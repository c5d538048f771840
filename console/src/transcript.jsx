// A conversation as entries (`{role, blocks}`), built from stored history messages or from
// a turn's delta events, and rendered: markdown for the agent's text, thinking folded, tool
// calls with their arguments and results.

import { renderMarkdown } from './markdown.js';

/** The blocks of a history message's content (a string or a list of blocks). */
function blocksOf(content) {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  return (content || []).map((block) => {
    switch (block.type) {
      case 'text':
        return { type: 'text', text: block.text };
      case 'thinking':
        return { type: 'thinking', text: block.thinking ?? block.text ?? '' };
      case 'tool_use':
        return { type: 'tool_use', id: block.toolCallId ?? block.id, name: block.name, input: block.input };
      case 'image':
        return { type: 'text', text: `[image: ${block.url ?? block.source?.url ?? ''}]` };
      default:
        return { type: 'other', value: block };
    }
  });
}

/** Entries and tool results from history messages. */
export function fromHistory(messages) {
  const entries = [];
  const results = {};
  for (const message of messages) {
    if (message.role === 'tool') {
      results[message.toolCallId] = message.content;
      continue;
    }
    entries.push({ role: message.role, blocks: blocksOf(message.content) });
  }
  return { entries, results };
}

/**
 * Applies one delta-mode event to a live turn `{entries, results, split}` and returns the
 * new state (the old one is not changed).
 */
export function applyEvent(turn, event) {
  const entries = turn.entries.map((e) => ({ ...e, blocks: [...e.blocks] }));
  const results = { ...turn.results };
  let split = turn.split;
  const assistant = () => {
    const last = entries[entries.length - 1];
    if (!last || last.role !== 'assistant' || split) {
      split = false;
      const entry = { role: 'assistant', blocks: [] };
      entries.push(entry);
      return entry;
    }
    return last;
  };
  const data = event.data || {};
  switch (event.event) {
    case 'text_delta':
    case 'thinking_delta': {
      const type = event.event === 'text_delta' ? 'text' : 'thinking';
      const entry = assistant();
      const last = entry.blocks[entry.blocks.length - 1];
      if (last && last.type === type) entry.blocks[entry.blocks.length - 1] = { ...last, text: last.text + data.delta };
      else entry.blocks.push({ type, text: data.delta });
      break;
    }
    case 'text':
      assistant().blocks.push({ type: 'text', text: data.text });
      break;
    case 'thinking':
      assistant().blocks.push({ type: 'thinking', text: data.thinking });
      break;
    case 'tool_call':
      assistant().blocks.push({ type: 'tool_use', id: data.toolCallId, name: data.name, input: data.input });
      break;
    case 'tool_result':
      results[data.toolCallId] = data.content;
      split = true;
      break;
    default:
      break;
  }
  return { entries, results, split };
}

/** Tool calls of the entries that no result answers. */
export function unanswered(entries, results) {
  const calls = [];
  for (const entry of entries) {
    for (const block of entry.blocks) {
      if (block.type === 'tool_use' && !(block.id in results)) calls.push(block);
    }
  }
  return calls;
}

function textOf(content) {
  if (typeof content === 'string') return content;
  return (content || [])
    .map((block) => (block.type === 'text' ? block.text : JSON.stringify(block)))
    .join('\n');
}

function Block({ block, results }) {
  switch (block.type) {
    case 'text':
      return <div class="markdown" dangerouslySetInnerHTML={{ __html: renderMarkdown(block.text) }} />;
    case 'thinking':
      return (
        <details class="thinking">
          <summary>Thinking</summary>
          <p class="pre">{block.text}</p>
        </details>
      );
    case 'tool_use': {
      const answered = block.id in results;
      return (
        <div class="tool" data-tool-call={block.id}>
          <div class="tool-head">
            <span class="badge">tool call</span> <strong>{block.name}</strong>{' '}
            <code class="muted">{block.id}</code>
          </div>
          <pre class="json" aria-label={`Arguments of ${block.name}`}>
            {JSON.stringify(block.input ?? {}, null, 2)}
          </pre>
          {answered && (
            <div class="tool-result" data-testid="tool-result">
              <span class="badge">result</span>
              <pre class="pre">{textOf(results[block.id])}</pre>
            </div>
          )}
        </div>
      );
    }
    default:
      return <pre class="json">{JSON.stringify(block.value, null, 2)}</pre>;
  }
}

export function Entry({ entry, results }) {
  const label = entry.role === 'user' ? 'You' : entry.role === 'assistant' ? 'Agent' : entry.role;
  return (
    <article class={`entry entry-${entry.role}`} aria-label={`${label} message`}>
      <div class="entry-role">{label}</div>
      <div class="entry-body">
        {entry.role === 'user'
          ? entry.blocks.map((block, i) =>
              block.type === 'text' ? (
                <p class="pre" key={i}>
                  {block.text}
                </p>
              ) : (
                <Block key={i} block={block} results={results} />
              ),
            )
          : entry.blocks.map((block, i) => <Block key={i} block={block} results={results} />)}
      </div>
    </article>
  );
}
