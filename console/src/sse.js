// Server-sent events read from a fetch body: frames of `id:`, `event:` and `data:` lines
// separated by a blank line; comments (`: keep-alive`) are skipped.

/** Reads `body` to its end, calling `onEvent({id, event, data})` for each frame. */
export async function readEvents(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  // A `\r` that ends a chunk may be the first half of a `\r\n`: it waits for the next one.
  let held = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    let text = held + value;
    held = text.endsWith('\r') ? '\r' : '';
    if (held) text = text.slice(0, -1);
    buffer += text.replace(/\r\n?/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = parseFrame(frame);
      if (event) onEvent(event);
    }
  }
}

function parseFrame(frame) {
  let id = null;
  let event = 'message';
  const data = [];
  for (const line of frame.split('\n')) {
    if (!line || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'id') id = value;
    else if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  if (!data.length && id === null) return null;
  const text = data.join('\n');
  let parsed = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // a data line that is not JSON is given as text
  }
  return { id: id === null ? null : Number(id), event, data: parsed };
}
