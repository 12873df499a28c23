/**
 * The name of the first member that an object of this JSON text repeats, or undefined.
 * JSON.parse keeps the last of repeated members while other parsers keep the first (or
 * refuse), so a signed document with a repeated member would read differently in different
 * verifiers while its signature checks in all of them; signed formats refuse it instead.
 * `text` must already be valid JSON (JSON.parse accepted it): this only walks its tokens.
 */
export function repeatedMember(text: string): string | undefined {
  // One entry per open container: the member names seen so far, or null for an array.
  const open: (Set<string> | null)[] = [];
  for (let i = 0; i < text.length; i += 1) {
    const char = text[i];
    if (char === '{') open.push(new Set());
    else if (char === '[') open.push(null);
    else if (char === '}' || char === ']') open.pop();
    else if (char === '"') {
      const start = i;
      for (i += 1; text[i] !== '"'; i += 1) if (text[i] === '\\') i += 1;
      const names = open[open.length - 1];
      if (!names) continue;
      let next = i + 1;
      while (text[next] === ' ' || text[next] === '\t' || text[next] === '\n' || text[next] === '\r') next += 1;
      if (text[next] !== ':') continue;
      const name = JSON.parse(text.slice(start, i + 1)) as string;
      if (names.has(name)) return name;
      names.add(name);
    }
  }
  return undefined;
}

/**
 * The first two member names of `object` that differ only in the case of ASCII letters
 * (`x` and `X`), or undefined. Readers that match names without regard to case, as Go's
 * encoding/json does, take one of them where JSON.parse takes the other, so a document
 * read by such readers too refuses them (docs/public-keys.md, the trust rule's step 1).
 */
export function caseVariantMembers(object: object): readonly [string, string] | undefined {
  const seen = new Map<string, string>();
  for (const name of Object.keys(object)) {
    const folded = name.replace(/[A-Z]/g, (letter) => letter.toLowerCase());
    const first = seen.get(folded);
    if (first !== undefined) return [first, name];
    seen.set(folded, name);
  }
  return undefined;
}
