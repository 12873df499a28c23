import { distance } from 'fastest-levenshtein';

/**
 * The candidate nearest to what was typed, by edit distance, as @oclif/plugin-not-found
 * picks it (its `closest`, over the same Levenshtein implementation), but only when it is
 * near enough to be a typo: at most one edit in four characters. The plugin itself cannot
 * serve: it suggests only in a prompt on a terminal, and reports in its own format (exit 127).
 */
export function didYouMean(typed: string, candidates: readonly string[]): string | undefined {
  const wanted = typed.toLowerCase();
  let best: { candidate: string; distance: number } | undefined;
  for (const candidate of candidates) {
    const edits = distance(wanted, candidate.toLowerCase());
    if (!best || edits < best.distance || (edits === best.distance && candidate < best.candidate)) best = { candidate, distance: edits };
  }
  return best && best.distance <= Math.max(1, Math.floor(best.candidate.length / 4)) ? best.candidate : undefined;
}
