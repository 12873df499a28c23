/**
 * oclif's parse errors as one readable line. oclif renders them for a terminal: a heading,
 * then a word-wrapped list of the arguments or reasons, perhaps dimmed with ANSI colours, and
 * "See more help with --help". Our errors are one `Error: ... (CODE)` line, so the heading,
 * the items and any note are joined, and the names of the missing arguments always appear.
 */
export function usageMessage(error: { readonly message: string; readonly args?: unknown }): string {
  // eslint-disable-next-line no-control-regex
  const text = (error.message ?? '').replace(/\u001b\[[0-9;]*m/g, '').replace(/\s*See more help with --help\s*$/, '');
  const [first = '', ...notes] = text.split(/\n\s*\n/);
  const [heading = '', ...items] = first.split('\n').map((line) => line.trim()).filter(Boolean);
  let line: string;
  if (Array.isArray(error.args) && error.args.length > 0) {
    // RequiredArgsError: its args carry name and description, which the wrapped list mangles.
    const named = (error.args as Array<{ name?: string; description?: string }>).filter((arg) => arg.name);
    line = `${heading} ${named.map((arg) => (arg.description ? `${arg.name} (${arg.description})` : arg.name)).join(', ')}`;
  } else if (/^The following errors? occurred:$/.test(heading) && items.length > 0) {
    line = items.join('; ');
  } else if (items.length > 0) {
    line = `${heading}${heading.endsWith(':') ? '' : ':'} ${items.join(' ')}`;
  } else {
    line = heading;
  }
  const rest = notes.map((note) => note.split('\n').map((part) => part.trim()).filter(Boolean).join(' '));
  return [line.trim(), ...rest].join(' ');
}
