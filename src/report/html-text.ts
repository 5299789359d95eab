const ESCAPES: Record<string, string> = {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}

/** Text as HTML (or SVG) content or a quoted attribute value: `<script>` and `" onerror=` stay text. */
export function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c])
}
