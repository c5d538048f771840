// Markdown rendered safely: raw HTML in the source is shown as text (never parsed), and
// the produced HTML is sanitized again with DOMPurify before it reaches the page.

import { Marked } from 'marked';
import DOMPurify from 'dompurify';

const escape = (text) =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

const marked = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    html({ text }) {
      return escape(text);
    },
  },
});

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    node.setAttribute('rel', 'noopener noreferrer nofollow');
    node.setAttribute('target', '_blank');
  }
});

/** Safe HTML for a markdown text. */
export function renderMarkdown(text) {
  const html = marked.parse(String(text ?? ''), { async: false });
  return DOMPurify.sanitize(html, {
    FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe'],
    FORBID_ATTR: ['style'],
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#|data:image\/(?:png|gif|jpeg|webp);)/i,
  });
}
